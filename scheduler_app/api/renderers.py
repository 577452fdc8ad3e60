"""The API's one renderer: JSON that any text a client sent, and any number a row holds, can be written in."""

import copy

from rest_framework.renderers import JSONRenderer

from ..sql.readable import finite


class SafeJSONRenderer(JSONRenderer):
    """DRF's JSON renderer that falls back to ASCII escapes for text with no UTF-8 form, and null for NaN.

    A JSON body may carry a lone surrogate (``"\\ud800"``); Python decodes it
    into a string that cannot be encoded as UTF-8, and an error message that
    echoes it (an unknown key, an unknown task) made DRF's renderer, which
    writes UTF-8 (``ensure_ascii=False``), raise UnicodeEncodeError: a 500.
    Such a document is written with ``ensure_ascii=True`` instead, which
    escapes the surrogate as it came in (``\\ud800``). A NaN or an infinity
    (a float column of a row written around the service), which DRF's strict
    JSON refuses with ValueError, is written as null. Every other response
    is written exactly as DRF writes it.
    """

    def render(self, data, accepted_media_type=None, renderer_context=None):
        try:
            return self._render(data, accepted_media_type, renderer_context)
        except ValueError as exc:
            if isinstance(exc, UnicodeEncodeError) or "JSON compliant" not in str(exc):
                raise
            return self._render(finite(data), accepted_media_type, renderer_context)

    def _render(self, data, accepted_media_type, renderer_context):
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            escaping = copy.copy(self)
            escaping.ensure_ascii = True
            return JSONRenderer.render(escaping, data, accepted_media_type, renderer_context)
