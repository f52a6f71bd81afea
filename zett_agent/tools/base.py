"""Tools: ``@tool`` turns an annotated function into an ``AgentTool``.

The docstring is the tool's documentation for the model::

    def add(a: int, b: int) -> int:
        '''Add two integers exactly.

        Args:
            a: The first addend.
            b: The second addend.

        Snippet:
            add(a=2, b=3)

        Guidelines:
            - Use for any integer addition instead of mental arithmetic.
        '''

The first paragraph is the description, ``Args:`` describes parameters, ``Snippet:`` gives
an example call and ``Guidelines:`` lists rules. A tool without a description or without a
guideline is a ``ValueError``. Parameters become a JSON Schema built by pydantic, and the
model's arguments are validated by the same pydantic model (unknown keys rejected) before the
body runs. Async bodies run on the event loop; sync bodies run in a worker thread
(``zett_agent._threads``: one queue hop there and one back, cheaper than
``asyncio.to_thread``; cancellation leaves the body running to its end, as there).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_type_hints, overload

import pydantic
import pydantic_core

from zett_agent._threads import run_in_thread
from zett_agent.messages import ContentPart, ImageContent, TextContent
from zett_agent.model import ToolDefinition

if TYPE_CHECKING:
    from zett_agent._context import AgentRunContext

__all__ = [
    "AgentTool",
    "ToolResult",
    "current_run_context",
    "current_tool_call_id",
    "render_tool_guidance",
    "tool",
]

_current_tool_call_id: ContextVar[str | None] = ContextVar(
    "zett_current_tool_call_id", default=None
)


_current_run_context: ContextVar[Any] = ContextVar("zett_current_run_context", default=None)


def current_run_context() -> AgentRunContext:
    """Return the AgentRunContext of the tool being executed (``RuntimeError`` outside)."""
    context = _current_run_context.get()
    if context is None:
        raise RuntimeError("current_run_context() is only available while a tool runs")
    return context


def current_tool_call_id() -> str | None:
    """Return the id of the tool call being executed, or None outside a tool."""
    return _current_tool_call_id.get()


@dataclass(slots=True)
class ToolResult:
    """What one tool execution produced; ``after_tool`` may edit it before it is appended."""

    content: str | list[ContentPart]
    success: bool = True
    #: Copied onto the ToolMessage's ``attributes``; never sent to a provider.
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class AgentTool:
    """A local tool: its model-facing definition and the handler that runs it.

    ``handler`` receives the validated arguments as keyword arguments and may be sync or
    async. ``@tool`` builds one from a function; construct it directly for hand-written
    schemas (the arguments are then checked only by the handler itself).

    What a host does with a call that was running when its process died: by default the
    call is not run again (it may or may not have happened). ``idempotent``: running it
    twice does no harm, so it is run again. ``atomic``: a sync handler whose writes a host
    can commit in one transaction together with the call's result (the chat app does so
    for tools that write through the Django ORM), so it is run again exactly when nothing
    of it was committed. The runtime itself only carries the two flags.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[..., Any]
    guidelines: tuple[str, ...] = ()
    snippet: str | None = None
    #: How a call cut off by a crash may be run again (see above); set by ``@tool``, or on
    #: a hand-built tool after construction (the constructor's parameters are the above).
    idempotent: bool = field(default=False, init=False, compare=False)
    atomic: bool = field(default=False, init=False, compare=False)
    # Filled by ``@tool`` or on first use; not constructor parameters.
    _validator: type[pydantic.BaseModel] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _definition: ToolDefinition | None = field(default=None, init=False, repr=False, compare=False)
    _is_async: bool | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise ValueError(
                f"Tool name must be 1-64 letters, digits, '_' or '-', got {self.name!r}"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ValueError(f"Tool {self.name!r} needs a description")
        if not callable(self.handler):
            raise TypeError(f"Tool {self.name!r} handler must be callable")
        # One string is one guideline, not one guideline per character.
        guidelines = self.guidelines
        self.guidelines = (guidelines,) if isinstance(guidelines, str) else tuple(guidelines)

    @property
    def definition(self) -> ToolDefinition:
        """The definition offered to the model."""
        if self._definition is None:
            self._definition = ToolDefinition(self.name, self.description, self.parameters)
        return self._definition

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Return the handler's keyword arguments; raise ``ValueError`` for invalid input."""
        if not isinstance(arguments, dict):
            raise ValueError(f"Arguments must be a JSON object, got {type(arguments).__name__}")
        if self._validator is None:
            return arguments
        try:
            model = self._validator.model_validate(arguments)
        except pydantic.ValidationError as exc:
            raise ValueError(_describe_validation_error(self.name, exc)) from None
        # A model's __dict__ holds exactly its fields' validated values, in their order.
        return dict(model.__dict__)

    async def __call__(self, arguments: Mapping[str, Any]) -> Any:
        """Run the tool from Python as the model would: ``await add({"a": 2, "b": 3})``.

        Arguments are validated first (a ``@tool``'s pydantic model raises its
        ``ValidationError``); returns the handler's own value, not yet serialised.
        """
        if self._validator is not None:
            parsed = self._validator.model_validate(dict(arguments))
            fields = type(parsed).model_fields
            return await self._run({name: getattr(parsed, name) for name in fields})
        return await self._run(dict(arguments))

    def serialize_result(self, value: Any) -> str:
        """The text a returned value becomes: a ``str`` as is, anything else as JSON."""
        return serialize_value(value)

    async def invoke(self, arguments: dict[str, Any]) -> Any:
        """Validate ``arguments`` and run the handler; return what it returned.

        A handler known to be async is awaited right here, one coroutine fewer per call.
        """
        kwargs = self.validate_arguments(arguments)
        if self._is_async:
            return await self.handler(**kwargs)
        return await self._run(kwargs)

    async def _run(self, kwargs: dict[str, Any]) -> Any:
        if self._is_async is None:
            handler = self.handler
            self._is_async = inspect.iscoroutinefunction(handler) or (
                not inspect.isfunction(handler)
                and inspect.iscoroutinefunction(type(handler).__call__)
            )
        if self._is_async:
            return await self.handler(**kwargs)
        result = await run_in_thread(self.handler, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result


def to_tool_result(value: Any) -> ToolResult:
    """Convert a handler's return value into a ``ToolResult``.

    A ``str`` is used as is; a content part or a list of them becomes multimodal content;
    a ``ToolResult`` passes through; anything else is serialised to JSON (pydantic JSON mode).
    """
    if isinstance(value, str):
        return ToolResult(value)
    kind = type(value)
    if kind is int:  # the JSON of a plain int is its decimal text: no encoder needed
        return ToolResult(str(value))
    if kind is bool or value is None:
        return ToolResult(_JSON_CONSTANTS[value])
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, TextContent | ImageContent):
        return ToolResult([value])
    if (
        isinstance(value, list)
        and value
        and all(isinstance(part, TextContent | ImageContent) for part in value)
    ):
        return ToolResult(list(value))
    return ToolResult(serialize_value(value))


def serialize_value(value: Any) -> str:
    """A ``str`` as is; anything else as JSON (pydantic JSON mode, non-ASCII kept)."""
    if isinstance(value, str):
        return value
    return _JSON.encode(pydantic_core.to_jsonable_python(value))


#: What ``json.dumps(value, ensure_ascii=False)`` builds on every call, built once.
_JSON = json.JSONEncoder(ensure_ascii=False)
_JSON_CONSTANTS = {True: "true", False: "false", None: "null"}


def _describe_validation_error(tool_name: str, exc: pydantic.ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        problems.append(f"{where}: {error['msg']}")
    return f"Invalid arguments for tool {tool_name!r}: " + "; ".join(problems)


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Snippet|Guidelines|Returns|Raises):\s*$")


@dataclass(slots=True)
class _Docstring:
    description: str = ""
    arguments: dict[str, str] = field(default_factory=dict)
    snippet: str | None = None
    guidelines: list[str] = field(default_factory=list)


def _parse_docstring(doc: str | None) -> _Docstring:
    """Split a Google-style docstring into description, Args, Snippet and Guidelines."""
    parsed = _Docstring()
    if not doc:
        return parsed
    lines = inspect.cleandoc(doc).splitlines()
    sections: dict[str, list[str]] = {"": []}
    current = ""
    for line in lines:
        match = _SECTION.match(line.strip()) if not line.startswith((" ", "\t")) else None
        if match:
            current = match.group(1)
            sections[current] = []
        else:
            sections[current].append(line)
    intro = "\n".join(sections[""]).strip()
    parsed.description = re.split(r"\n\s*\n", intro, maxsplit=1)[0].strip() if intro else ""
    parsed.description = " ".join(parsed.description.split())

    arg_lines = sections.get("Args") or sections.get("Arguments") or sections.get("Parameters")
    if arg_lines:
        name = None
        for raw in inspect.cleandoc("\n".join(arg_lines)).splitlines():
            entry = re.match(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", raw)
            if entry and not raw.startswith((" ", "\t")):
                name = entry.group(1).lstrip("*")
                parsed.arguments[name] = entry.group(2).strip()
            elif name and raw.strip():
                parsed.arguments[name] = f"{parsed.arguments[name]} {raw.strip()}".strip()
    if sections.get("Snippet"):
        snippet = inspect.cleandoc("\n".join(sections["Snippet"])).strip()
        parsed.snippet = snippet or None
    if sections.get("Guidelines"):
        for raw in inspect.cleandoc("\n".join(sections["Guidelines"])).splitlines():
            stripped = raw.strip()
            if stripped.startswith(("- ", "* ")):
                parsed.guidelines.append(stripped[2:].strip())
            elif stripped and parsed.guidelines:
                parsed.guidelines[-1] = f"{parsed.guidelines[-1]} {stripped}"
            elif stripped:
                parsed.guidelines.append(stripped)
    return parsed


def _build_validator(
    function: Callable[..., Any], descriptions: dict[str, str], tool_name: str
) -> tuple[type[pydantic.BaseModel], dict[str, Any]]:
    signature = inspect.signature(function)
    try:
        hints = get_type_hints(function, include_extras=True)
    except Exception as exc:  # unresolved forward references
        raise TypeError(f"Cannot resolve the annotations of tool {tool_name!r}: {exc}") from exc
    unknown = sorted(set(descriptions) - set(signature.parameters))
    if unknown:
        raise ValueError(
            f"Docstring Args contains unknown parameters: {', '.join(unknown)} (tool {tool_name!r})"
        )
    fields: dict[str, Any] = {}
    for name, parameter in signature.parameters.items():
        if parameter.kind not in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
            raise ValueError(
                f"Tools accept only named parameters: {tool_name!r} cannot take {parameter}"
            )
        if name not in hints:
            raise ValueError(
                f"Missing annotation for {name} (tool {tool_name!r}): annotate every "
                "parameter so its arguments can be validated"
            )
        annotation = hints[name]
        default = ... if parameter.default is parameter.empty else parameter.default
        # An explicit description=None would override one given with
        # Annotated[..., Field(description=...)], so pass the docstring's only when it has one.
        description = descriptions.get(name)
        extra = {"description": description} if description else {}
        fields[name] = (annotation, pydantic.Field(default, **extra))
    model = pydantic.create_model(
        f"{tool_name}_arguments",
        __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
        **fields,
    )
    schema = model.model_json_schema()
    schema.pop("title", None)  # the generated model's name, not the tool's
    schema = _self_contained(schema, tool_name)
    schema.setdefault("properties", {})
    return model, schema


def _self_contained(schema: dict[str, Any], tool_name: str) -> dict[str, Any]:
    """The schema with every ``$ref`` replaced by its definition, and no ``$defs``.

    Several providers refuse references in tool schemas, so nested models are written out
    in place. A discriminated union's ``discriminator`` is dropped with the definitions:
    its mapping names them by reference, and ``oneOf`` with each member's literal tag
    already says which member is which. A recursive model cannot be written out: it is a
    ``ValueError``.
    """
    definitions = schema.pop("$defs", {})
    if not definitions:
        return schema

    def resolve(node: Any, seen: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [resolve(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        reference = node.get("$ref")
        if not isinstance(reference, str):
            return {
                key: resolve(value, seen)
                for key, value in node.items()
                if not _is_discriminator(key, value)
            }
        name = reference.rsplit("/", 1)[-1]
        if name in seen:
            raise ValueError(
                f"Tool {tool_name!r} takes a recursive model ({name}): its references "
                "cannot be expanded into a self-contained schema"
            )
        expanded = resolve(definitions[name], seen | {name})
        siblings = {key: resolve(value, seen) for key, value in node.items() if key != "$ref"}
        return {**expanded, **siblings}

    return resolve(schema, frozenset())


def _is_discriminator(key: str, value: Any) -> bool:
    """Whether ``key: value`` is the OpenAPI ``discriminator`` keyword (not a property so named)."""
    return key == "discriminator" and isinstance(value, dict) and "propertyName" in value


def _make_tool(
    function: Callable[..., Any],
    *,
    name: str | None,
    snippet: str | None,
    guidelines: Sequence[str] | None,
    description: str | None,
    idempotent: bool = False,
    atomic: bool = False,
) -> AgentTool:
    if not callable(function):
        raise TypeError(f"@tool needs a function, got {type(function).__name__}")
    tool_name = name or function.__name__
    doc = _parse_docstring(inspect.getdoc(function))
    text = description or doc.description
    if not text:
        raise ValueError(f"A tool needs a docstring description: {tool_name!r} has none")
    if isinstance(guidelines, str):
        guidelines = [guidelines]  # one string is one guideline, not one per character
    rules = [rule.strip() for rule in (guidelines if guidelines is not None else doc.guidelines)]
    rules = [rule for rule in rules if rule]
    if not rules:
        raise ValueError(
            f"A tool needs at least one non-empty guideline: add a 'Guidelines:' section to "
            f"the docstring of {tool_name!r} or pass guidelines=[...]"
        )
    validator, schema = _build_validator(function, doc.arguments, tool_name)
    built = AgentTool(
        name=tool_name,
        description=text,
        parameters=schema,
        handler=function,
        guidelines=tuple(rules),
        snippet=snippet if snippet is not None else doc.snippet,
    )
    if atomic and inspect.iscoroutinefunction(function):
        raise TypeError(
            f"Tool {tool_name!r} is atomic, so it must be a plain (sync) function: its writes "
            "commit in one transaction with its result"
        )
    built.idempotent, built.atomic = bool(idempotent), bool(atomic)
    built._validator = validator
    return built


@overload
def tool(function: Callable[..., Any], /) -> AgentTool: ...
@overload
def tool(
    *,
    name: str | None = None,
    snippet: str | None = None,
    guidelines: Sequence[str] | None = None,
    description: str | None = None,
    idempotent: bool = False,
    atomic: bool = False,
) -> Callable[[Callable[..., Any]], AgentTool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    snippet: str | None = None,
    guidelines: Sequence[str] | None = None,
    description: str | None = None,
    idempotent: bool = False,
    atomic: bool = False,
) -> AgentTool | Callable[[Callable[..., Any]], AgentTool]:
    """Turn an annotated function into an ``AgentTool``; usable bare or with options.

    ``guidelines`` replaces the docstring's ``Guidelines:``; a single string is one rule.
    A parameter described both by ``Args:`` and by ``Annotated[..., Field(description=...)]``
    gets the docstring's description. ``idempotent`` and ``atomic`` say whether a call
    cut off by a crash may run again (``AgentTool``).
    """
    options = {
        "name": name,
        "snippet": snippet,
        "guidelines": guidelines,
        "description": description,
        "idempotent": idempotent,
        "atomic": atomic,
    }
    if function is not None:
        return _make_tool(function, **options)

    def decorate(inner: Callable[..., Any]) -> AgentTool:
        return _make_tool(inner, **options)

    return decorate


def render_tool_guidance(tools: Iterable[AgentTool]) -> str:
    """Render the "Tool snippets" and "Tool guidelines" sections for a system message.

    Snippets come first, one bullet per tool (``- name: call``; a multi-line snippet is
    indented under ``- name:``), then one ``## name`` group of ``- rule`` bullets per tool.
    Returns an empty string when no tool has a snippet or a guideline.
    """
    tools = list(tools)
    snippets = [_snippet_bullet(t) for t in tools if t.snippet]
    groups = [
        f"## {t.name}\n" + "\n".join(f"- {rule}" for rule in t.guidelines)
        for t in tools
        if t.guidelines
    ]
    sections: list[str] = []
    if snippets:
        sections.append("# Tool snippets\n" + "\n".join(snippets))
    if groups:
        sections.append("# Tool guidelines\n" + "\n\n".join(groups))
    return "\n\n".join(sections)


def _snippet_bullet(agent_tool: AgentTool) -> str:
    """A tool's snippet as one bullet; every line of a multi-line one stays inside it."""
    lines = (agent_tool.snippet or "").splitlines()
    if len(lines) == 1:
        return f"- {agent_tool.name}: {lines[0]}"
    body = "\n".join(f"  {line}" if line.strip() else "" for line in lines)
    return f"- {agent_tool.name}:\n{body}"
