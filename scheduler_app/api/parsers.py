"""A JSON parser that bounds what a request body may cost."""

import codecs

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.utils import json

from .exceptions import PayloadTooLarge, max_body_size


class BoundedJSONParser(JSONParser):
    """Parse JSON, refusing bodies over the size limit and pathological nesting.

    DRF hands JSON parsers ``request.body``, where Django enforces
    DATA_UPLOAD_MAX_MEMORY_SIZE (the exception handler makes that a 413);
    this parser checks again so that the limit holds even when that
    setting is None (no limit in Django) or DRF reads the stream. A document nested deeper than the
    interpreter's recursion limit raises RecursionError in ``json``, which
    DRF's parser would let through as a 500.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        limit = max_body_size()
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise PayloadTooLarge(limit)
        encoding = (parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET
        try:
            text = codecs.decode(raw, encoding)
            parse_constant = json.strict_constant if self.strict else None
            return json.loads(text, parse_constant=parse_constant)
        except (ValueError, LookupError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply.") from None
