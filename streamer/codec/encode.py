"""Per-schema Avro binary writers, generated once per table version.

fastavro's pure-Python writer (the fast one on PyPy) walks the schema for every record: a type
dispatch per field, union branch resolution and logical-type lookups. Here each schema is turned,
once, into straight-line Python code for exactly its fields, which PyPy's JIT compiles well. The
output is byte-for-byte what ``fastavro.schemaless_writer`` writes for the same datum (the tests
check every type), and it accepts the same datums, including fastavro's ``(branch, value)``
tuple notation for unions.

Only the types the streamer's schemas use are supported; ``compile_writer`` raises
``GeneratedWriterUnsupported`` for anything else so the caller can fall back to fastavro.
"""
from __future__ import annotations

import platform
import struct
from types import CodeType
from typing import Any, Callable, Dict, List, Optional

from streamer.errors import GeneratedWriterUnsupported

_FLOAT = struct.Struct("<f").pack
_DOUBLE = struct.Struct("<d").pack
_INT64 = struct.Struct(">q").pack


def write_long(buf: bytearray, n: int) -> None:
    n = (n << 1) ^ (n >> 63)
    while n & ~0x7F:
        buf.append((n & 0x7F) | 0x80)
        n >>= 7
    buf.append(n)


def _packed_signed_bytes(n: int) -> bytes:
    """``n`` (a decimal's unscaled value) in two's complement, big-endian, in the fewest bytes
    that hold it and its sign, as fastavro writes it; by way of a packed long when it fits one:
    under PyPy, where int's to_bytes goes through its big-integer code, ~30 against ~130 ns."""
    size = (n.bit_length() + 8) // 8  # bit_length is the magnitude's: one bit more for the sign
    if size <= 8:
        return _INT64(n)[8 - size:]
    return n.to_bytes(size, "big", signed=True)


def _signed_bytes(n: int) -> bytes:
    return n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)


# CPython's to_bytes is C already, faster than the pack and its slice (~360 against ~460 ns).
signed_bytes = (_packed_signed_bytes if platform.python_implementation() == "PyPy"
                else _signed_bytes)


def write_string(buf: bytearray, s: str) -> None:
    b = s.encode("utf-8")
    write_long(buf, len(b))
    buf += b


def _bytes(buf: bytearray, b: bytes) -> None:
    write_long(buf, len(b))
    buf += b


def _decimal_bytes(value: Any, scale: int, precision: int) -> bytes:
    """fastavro's encoding of a decimal logical value: two's complement, big-endian."""
    if isinstance(value, int):
        unscaled = value * 10 ** scale
        if len(str(abs(value))) > precision:
            raise ValueError("The decimal precision is bigger than allowed by schema")
    elif getattr(value, "_is_special", True) is False:
        # PyPy's decimal is the pure-Python one, whose as_tuple() rebuilds a tuple of digits
        # from the digit string it keeps: reading that string is several times cheaper.
        digits_str = value._int
        if len(digits_str) > precision:
            raise ValueError("The decimal precision is bigger than allowed by schema")
        delta = value._exp + scale
        if delta < 0:
            raise ValueError("Scale provided in schema does not match the decimal")
        unscaled = int(digits_str) * 10 ** delta
        return signed_bytes(-unscaled if value._sign else unscaled)
    else:
        sign, digits, exp = value.as_tuple()
        if len(digits) > precision:
            raise ValueError("The decimal precision is bigger than allowed by schema")
        delta = exp + scale
        if delta < 0:
            raise ValueError("Scale provided in schema does not match the decimal")
        unscaled = 0
        for d in digits:
            unscaled = unscaled * 10 + d
        unscaled *= 10 ** delta
        return signed_bytes(-unscaled if sign else unscaled)
    return signed_bytes(unscaled)


_HELPERS = {"write_long": write_long, "write_string": write_string, "_bytes": _bytes, "_FLOAT": _FLOAT,
            "_DOUBLE": _DOUBLE, "_decimal_bytes": _decimal_bytes}


class _Gen:
    def __init__(self, schema: Any):
        self.lines: List[str] = []
        self.records: Dict[str, str] = {}   # full name -> generated function name
        self.defs: Dict[str, Any] = {}
        self.root = self._type(schema, "")

    def _fullname(self, schema: Dict[str, Any], space: str) -> str:
        name = schema["name"]
        ns = schema.get("namespace", space)
        return name if "." in name or not ns else f"{ns}.{name}"

    def _type(self, schema: Any, space: str) -> Any:
        """Return a callable-name for records, or a primitive descriptor."""
        if isinstance(schema, str):
            if schema in ("null", "boolean", "int", "long", "float", "double", "bytes", "string"):
                return schema
            full = schema if "." in schema or not space else f"{space}.{schema}"
            if full in self.records:
                return ("record", self.records[full])
            if schema in self.records:
                return ("record", self.records[schema])
            raise GeneratedWriterUnsupported(f"unknown named type {schema}")
        if isinstance(schema, list):
            return ("union", [self._type(s, space) for s in schema])
        t = schema.get("type")
        if t == "record":
            full = self._fullname(schema, space)
            fn = f"w{len(self.records)}"
            self.records[full] = fn
            ns = full.rpartition(".")[0]
            fields = [(f["name"], self._type(f["type"], ns)) for f in schema["fields"]]
            self._emit_record(fn, fields)
            return ("record", fn)
        if t == "bytes" and schema.get("logicalType") == "decimal":
            return ("decimal", int(schema.get("scale", 0)), int(schema["precision"]))
        if t == "array":
            return ("array", self._type(schema["items"], space))
        if isinstance(t, (str, list, dict)) and t not in ("enum", "fixed", "array", "map"):
            return self._type(t, space)
        raise GeneratedWriterUnsupported(f"Avro type {t!r} is not supported by the generated writer")

    def _write(self, desc: Any, var: str, indent: str, out: List[str]) -> None:
        if desc == "null":
            return
        if desc in ("int", "long"):
            out.append(f"{indent}write_long(buf, {var})")
        elif desc == "string":
            out.append(f"{indent}write_string(buf, {var})")
        elif desc == "bytes":
            out.append(f"{indent}_bytes(buf, {var})")
        elif desc == "float":
            out.append(f"{indent}buf += _FLOAT({var})")
        elif desc == "double":
            out.append(f"{indent}buf += _DOUBLE({var})")
        elif desc == "boolean":
            out.append(f"{indent}buf.append(1 if {var} else 0)")
        elif desc[0] == "record":
            out.append(f"{indent}{desc[1]}(buf, {var})")
        elif desc[0] == "decimal":
            out.append(f"{indent}_bytes(buf, _decimal_bytes({var}, {desc[1]}, {desc[2]}))")
        elif desc[0] == "union":
            self._write_union(desc[1], var, indent, out)
        elif desc[0] == "array":  # one block of all the items, then the empty block
            item = f"{var}_"
            out.append(f"{indent}if {var}:")
            out.append(f"{indent}    write_long(buf, len({var}))")
            out.append(f"{indent}    for {item} in {var}:")
            self._write(desc[1], item, indent + "        ", out)
            out.append(f"{indent}buf.append(0)")
        else:
            raise GeneratedWriterUnsupported(f"cannot write {desc!r}")

    def _write_union(self, branches: List[Any], var: str, indent: str, out: List[str]) -> None:
        non_null = [(i, b) for i, b in enumerate(branches) if b != "null"]
        if len(non_null) != 1 or len(branches) > 2:
            raise GeneratedWriterUnsupported("only [null, T] unions are supported by the generated writer")
        index, branch = non_null[0]
        null_index = 1 - index
        out.append(f"{indent}if {var} is None:")
        out.append(f"{indent}    buf.append({null_index * 2})")
        out.append(f"{indent}else:")
        out.append(f"{indent}    buf.append({index * 2})")
        out.append(f"{indent}    if {var}.__class__ is tuple:")
        out.append(f"{indent}        {var} = {var}[1]")
        self._write(branch, var, indent + "    ", out)

    def _emit_record(self, fn: str, fields: List[Any]) -> None:
        out = [f"def {fn}(buf, d):"]
        for i, (name, desc) in enumerate(fields):
            var = f"v{i}"
            if desc == "null":
                continue
            out.append(f"    {var} = d[{name!r}]")
            self._write(desc, var, "    ", out)
        if len(out) == 1:
            out.append("    pass")
        self.lines.extend(out)


# Given each function of a writer compiled ``apart``, once, when set: `streamer run` under PyPy
# sets it (cli._tune_jit) to have the JIT compile those on their own, not inlined into their
# callers. The one-row path publishes with such writers (schema.versions.OneRowVersion).
compiled_apart: Optional[Callable[[CodeType], None]] = None


def compile_writer(schema: Any, apart: bool = False) -> Callable[[bytearray, Any], None]:
    """A function ``write(buf, datum)`` appending the Avro binary encoding of datum to buf.
    ``apart``: its functions are handed to ``compiled_apart``."""
    gen = _Gen(schema)
    if not isinstance(gen.root, tuple) or gen.root[0] != "record":
        raise GeneratedWriterUnsupported("the generated writer needs a record at the top")
    namespace: Dict[str, Any] = dict(_HELPERS)
    # Records are defined before use in the generated module: nested ones are emitted first.
    code = compile("\n".join(gen.lines), "<avro writer>", "exec")
    exec(code, namespace)  # noqa: S102 - source generated from a schema, names are quoted
    if apart and compiled_apart is not None:
        for fn in gen.records.values():
            compiled_apart(namespace[fn].__code__)
    return namespace[gen.root[1]]
