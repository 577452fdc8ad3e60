"""The API's one renderer: JSON that any text a client sent can be echoed in."""

import copy

from rest_framework.renderers import JSONRenderer


class SafeJSONRenderer(JSONRenderer):
    """DRF's JSON renderer that falls back to ASCII escapes for text with no UTF-8 form.

    A JSON body may carry a lone surrogate (``"\\ud800"``); Python decodes it
    into a string that cannot be encoded as UTF-8, and an error message that
    echoes it (an unknown key, an unknown task) made DRF's renderer, which
    writes UTF-8 (``ensure_ascii=False``), raise UnicodeEncodeError: a 500.
    Such a document is written with ``ensure_ascii=True`` instead, which
    escapes the surrogate as it came in (``\\ud800``); every other response
    is written exactly as DRF writes it.
    """

    def render(self, data, accepted_media_type=None, renderer_context=None):
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            escaping = copy.copy(self)
            escaping.ensure_ascii = True
            return JSONRenderer.render(escaping, data, accepted_media_type, renderer_context)
