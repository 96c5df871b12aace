"""`dataclass` and `field` for the modules every command imports, without the start-up cost.

The standard `dataclasses` imports `inspect` (and with it `ast`, `dis`, `tokenize`) and compiles
each class's `__init__`, `__repr__`, `__eq__` and `__hash__` from source with `exec`: together
about a fifth of the instructions of `approvals show` (issue 22). The records made here behave as
the dataclasses they replace for everything the console asks of them — positional and keyword
construction, defaults and `default_factory`, `frozen=True`, `repr=False`, `compare=False`,
equality and hashing by the compared fields, inheritance of fields — with methods shared by every
record instead of compiled per class.

`replace` is `dataclasses.replace` for them. They are dataclasses to the standard helpers too: `dataclasses.fields`, `replace`, `asdict` and
`is_dataclass` read `__dataclass_fields__`, which is built (importing `dataclasses` then, and
only then) the first time something asks for it. Only the two decorator forms the console uses
exist: `@dataclass` and `@dataclass(frozen=True)`.
"""

from __future__ import annotations

_MISSING = object()


class FrozenInstanceError(AttributeError):
    """A field of a frozen record was assigned (what `dataclasses.FrozenInstanceError` says)."""


class _Field:
    __slots__ = ("name", "type", "default", "default_factory", "repr", "compare")

    def __init__(self, default=_MISSING, default_factory=_MISSING, repr=True, compare=True):  # noqa: A002
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = self.type = None
        self.default, self.default_factory, self.repr, self.compare = default, default_factory, repr, compare


def field(*, default=_MISSING, default_factory=_MISSING, repr=True, compare=True):  # noqa: A002
    """A field's options, as `dataclasses.field` takes them (the ones the console uses)."""
    return _Field(default, default_factory, repr, compare)


def _is_classvar(annotation) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return text.startswith(("ClassVar", "typing.ClassVar"))


class _StandardFields:
    """`__dataclass_fields__` on first use: real `dataclasses.Field` objects, so the standard
    helpers (`fields`, `replace`, `asdict`, `is_dataclass`) work on records unchanged."""

    def __get__(self, instance, owner):
        import dataclasses

        built = {}
        for spec in owner.__record_fields__:
            made = dataclasses.field(
                **({"default": spec.default} if spec.default is not _MISSING else {}),
                **({"default_factory": spec.default_factory} if spec.default_factory is not _MISSING else {}),
                repr=spec.repr, compare=spec.compare)
            made.name, made.type, made.kw_only = spec.name, spec.type, False
            made._field_type = dataclasses._FIELD  # what dataclasses' own class processing sets
            built[spec.name] = made
        setattr(owner, "__dataclass_fields__", built)  # once per class
        return built


def _init(self, *args, **kwargs):
    specs = type(self).__record_fields__
    if len(args) > len(specs):
        raise TypeError(f"{type(self).__qualname__}() takes {len(specs)} arguments but {len(args)} were given")
    values = dict(zip((spec.name for spec in specs), args))
    for name, value in kwargs.items():
        if name in values:
            raise TypeError(f"{type(self).__qualname__}() got multiple values for argument {name!r}")
        values[name] = value
    unknown = set(values) - set(type(self).__record_names__)
    if unknown:
        raise TypeError(f"{type(self).__qualname__}() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    place = self.__dict__
    for spec in specs:
        if spec.name in values:
            place[spec.name] = values[spec.name]
        elif spec.default is not _MISSING:
            place[spec.name] = spec.default
        elif spec.default_factory is not _MISSING:
            place[spec.name] = spec.default_factory()
        else:
            raise TypeError(f"{type(self).__qualname__}() missing 1 required argument: {spec.name!r}")
    post_init = getattr(self, "__post_init__", None)
    if post_init is not None:
        post_init()


def _repr(self):
    shown = ", ".join(f"{spec.name}={getattr(self, spec.name)!r}" for spec in type(self).__record_fields__ if spec.repr)
    return f"{type(self).__qualname__}({shown})"


def _compared(self) -> tuple:
    return tuple(getattr(self, spec.name) for spec in type(self).__record_fields__ if spec.compare)


def _eq(self, other):
    if other.__class__ is self.__class__:
        return _compared(self) == _compared(other)
    return NotImplemented


def _hash(self):
    return hash(_compared(self))


def _frozen_setattr(self, name, value):
    if type(self).__dict__.get("__record_frozen__") or name in type(self).__record_names__:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _frozen_delattr(self, name):
    if type(self).__dict__.get("__record_frozen__") or name in type(self).__record_names__:
        raise FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


def _make(cls: type, frozen: bool) -> type:
    inherited: dict[str, _Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for spec in base.__dict__.get("__record_fields__", ()):
            inherited[spec.name] = spec
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if _is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, _MISSING)
        spec = value if isinstance(value, _Field) else _Field(default=value)
        spec.name, spec.type = name, annotation
        if isinstance(value, _Field):  # as dataclasses does: the class attribute is the default, or none
            if spec.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, spec.default)
        inherited[name] = spec  # a field named again keeps its place, as in dataclasses
    specs = tuple(inherited.values())
    required_after_default = [s.name for i, s in enumerate(specs) if s.default is _MISSING
                              and s.default_factory is _MISSING
                              and any(t.default is not _MISSING or t.default_factory is not _MISSING for t in specs[:i])]
    if required_after_default:
        raise TypeError(f"non-default argument {required_after_default[0]!r} follows default argument")
    cls.__record_fields__ = specs
    cls.__record_names__ = frozenset(spec.name for spec in specs)
    cls.__record_frozen__ = frozen
    cls.__dataclass_fields__ = _StandardFields()
    own = cls.__dict__
    if "__init__" not in own:
        cls.__init__ = _init
    if "__repr__" not in own:
        cls.__repr__ = _repr
    if "__eq__" not in own:
        cls.__eq__ = _eq
    if frozen:
        cls.__setattr__, cls.__delattr__ = _frozen_setattr, _frozen_delattr
        if "__hash__" not in own or own["__hash__"] is None:
            cls.__hash__ = _hash
    elif "__hash__" not in own:
        cls.__hash__ = None  # mutable and compared by value: unhashable, as a dataclass
    return cls


def dataclass(cls: type | None = None, /, *, frozen: bool = False):
    """`@dataclass` or `@dataclass(frozen=True)`: see the module's docstring."""
    if cls is None:
        return lambda inner: _make(inner, frozen)
    return _make(cls, frozen)


def replace(record, /, **changes):
    """A copy of `record` with `changes`, as `dataclasses.replace` makes it (a new instance, through
    `__init__`)."""
    values = {spec.name: getattr(record, spec.name) for spec in type(record).__record_fields__}
    unknown = set(changes) - set(values)
    if unknown:
        raise TypeError(f"{type(record).__qualname__}() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    values.update(changes)
    return type(record)(**values)


__all__ = ["FrozenInstanceError", "dataclass", "field", "replace"]
