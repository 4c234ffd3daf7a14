"""Tool calls in each model family's own format: detection, constraint, parsing.

``detect_format`` reads a chat template and returns its :class:`ToolCallFormat`;
``tool_call_constraint`` builds the constraint of a turn that calls tools in that format;
``ToolCallParser`` turns the generated turn back into OpenAI ``tool_calls`` deltas. The
server (``structgen.server.chat``) and the language (``gen(tools=...)``) use them.
"""

from structgen.tools.constraint import strict_schema, tool_call_constraint
from structgen.tools.formats import FORMATS, ToolCallFormat, detect_format, template_renders_tools
from structgen.tools.parser import ToolCallParser, collect

__all__ = [
    "FORMATS",
    "ToolCallFormat",
    "ToolCallParser",
    "collect",
    "detect_format",
    "strict_schema",
    "template_renders_tools",
    "tool_call_constraint",
]
