"""Argument names a provider does not take are renamed on the way out and mapped back when the
call comes in: Gemini's parameter names are ASCII letters, digits and underscores (starting with a
letter or an underscore, at most 64), Anthropic's property keys ``[a-zA-Z0-9_.-]{1,64}``. The tool
sees its own names; ``check`` warns about each renamed one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.genai import types as genai

from toolkeeper import Tool, Toolbox, ToolInvoker, export

GEMINI_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
ANTHROPIC_NAME = re.compile(r"[a-zA-Z0-9_.-]{1,64}")


def quote(año_vehiculo: int, marca: str) -> str:
    """Quote car insurance.

    Args:
        año_vehiculo: Year the car was made.
        marca: The car's make.
    """
    return f"{marca} {año_vehiculo}"


def _register(vehículo: dict[str, Any], dueños: list[dict[str, Any]] | None = None,
              **extra: Any) -> str:
    names = [d["nombre completo"] for d in dueños or []]
    return f"{vehículo['año']}/{vehículo['número de serie']}/{','.join(names)}/{sorted(extra)}"


REGISTER = Tool(
    name="register", description="Register a vehicle.", callable=_register,
    parameters={"type": "object", "required": ["vehículo"], "properties": {
        "vehículo": {"type": "object", "required": ["año", "número de serie"], "properties": {
            "año": {"type": "integer"}, "número de serie": {"type": "string"}}},
        "dueños": {"anyOf": [{"type": "array", "items": {"type": "object", "properties": {
            "nombre completo": {"type": "string"}}}}, {"type": "null"}]},
        "ano": {"type": "string", "description": "An unrelated argument named like the fold."},
    }})


def _keys(schema: Any) -> list[str]:
    """Every property name at every depth of a declared schema."""
    if isinstance(schema, list):
        return [k for item in schema for k in _keys(item)]
    if not isinstance(schema, dict):
        return []
    own = list(schema["properties"]) if isinstance(schema.get("properties"), dict) else []
    return own + [k for value in schema.values() for k in _keys(value)]


def _gemini_response(args: dict[str, Any], name: str = "quote") -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": name, "args": args}}]}}]}


def test_a_non_ascii_argument_goes_to_gemini_as_ascii_and_comes_back_under_its_own_name() -> None:
    tool = Tool.from_function(quote)
    exported = export([tool], "gemini")
    declaration = exported.declarations[0]
    genai.FunctionDeclaration.model_validate(declaration)
    params: Any = declaration["parameters"]
    assert sorted(params["properties"]) == ["ano_vehiculo", "marca"]
    assert sorted(params["required"]) == ["ano_vehiculo", "marca"]
    assert "año_vehiculo" in params["properties"]["ano_vehiculo"]["description"]
    (call,) = exported.parse(_gemini_response({"ano_vehiculo": 2019, "marca": "Seat"}))
    assert call.arguments == {"año_vehiculo": 2019, "marca": "Seat"}
    assert ToolInvoker([tool]).invoke_sync(call).text == "Seat 2019"


def test_a_catalog_runs_a_gemini_call_with_renamed_arguments_end_to_end() -> None:
    box = Toolbox([quote])
    message: Any
    (message,) = box.execute_tool_calls(_gemini_response({"ano_vehiculo": 2020, "marca": "Kia"}),
                                        "gemini")
    (part,) = message["parts"]
    assert part["functionResponse"]["response"] == {"output": "Kia 2020"}


def test_nested_and_listed_names_are_renamed_and_mapped_back_without_collisions() -> None:
    exported = export([REGISTER], "gemini")
    keys = _keys(exported.declarations[0]["parameters"])
    assert all(GEMINI_NAME.fullmatch(k) for k in keys), keys
    assert "ano" in keys and len(set(keys)) == len(keys)  # the real "ano" kept its name
    wire = {name: exported.names.arguments["register"].to_wire.get(name, name)
            for name in ("vehículo", "año", "número de serie", "dueños", "nombre completo")}
    args = {wire["vehículo"]: {wire["año"]: 2018, wire["número de serie"]: "X1"},
            wire["dueños"]: [{wire["nombre completo"]: "Ana Pérez"}], "ano": "kept"}
    (call,) = exported.parse(_gemini_response(args, "register"))
    assert call.arguments == {"vehículo": {"año": 2018, "número de serie": "X1"},
                              "dueños": [{"nombre completo": "Ana Pérez"}], "ano": "kept"}
    result = ToolInvoker([REGISTER]).invoke_sync(call)
    assert result.text == "2018/X1/Ana Pérez/['ano']", result.text


def test_anthropic_gets_its_own_key_rule_and_the_call_comes_back_whole() -> None:
    exported = export([REGISTER], "anthropic")
    keys = _keys(exported.declarations[0]["input_schema"])
    assert all(ANTHROPIC_NAME.fullmatch(k) for k in keys), keys
    to_wire = exported.names.arguments["register"].to_wire
    response = {"content": [{"type": "tool_use", "id": "toolu_1", "name": "register", "input": {
        to_wire["vehículo"]: {to_wire["año"]: 1999, to_wire["número de serie"]: "Z9"}}}]}
    (call,) = exported.parse(response)
    assert call.arguments == {"vehículo": {"año": 1999, "número de serie": "Z9"}}


def test_names_that_fit_are_sent_unchanged_and_declared_without_projection() -> None:
    def forecast(city: str, days: int = 3) -> str:
        """Forecast."""
        return city

    for api_format in ("gemini", "anthropic"):
        exported = export([Tool.from_function(forecast)], api_format)
        assert exported.names.arguments == {}
        assert all(p.severity == "info" for p in exported.problems)


def test_check_warns_about_each_renamed_argument() -> None:
    tool = Tool.from_function(quote)
    (warning,) = [p for p in tool.check("gemini") if p.severity == "warning"]
    assert warning.path == "parameters.año_vehiculo"
    assert "'año_vehiculo'" in warning.message and "'ano_vehiculo'" in warning.message
    assert "mapped back" in warning.message
    assert not [p for p in tool.check("openai-chat") if p.severity == "warning"]


def test_toolkeeper_check_lists_the_renamed_argument(tmp_path: Path) -> None:
    source = tmp_path / "cars.py"
    source.write_text("def quote(año_vehiculo: int) -> str:\n"
                      "    '''Quote car insurance.'''\n    return str(año_vehiculo)\n")
    result = subprocess.run(
        [sys.executable, "-m", "toolkeeper.cli", "check", f"{source}:quote", "-f", "gemini"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "400"})
    assert result.returncode == 1, result.stdout + result.stderr
    line = " ".join(result.stdout.split())
    assert "warning" in line and "'año_vehiculo'" in line and "'ano_vehiculo'" in line


@pytest.mark.parametrize("name", ["数量", "first name", "user-id", "2nd", "x" * 80])
def test_any_name_gets_a_gemini_name_that_maps_back(name: str) -> None:
    tool = Tool(name="t", description="T.", callable=lambda **kw: kw,
                parameters={"type": "object", "properties": {name: {"type": "string"}}})
    exported = export([tool], "gemini")
    parameters: Any = exported.declarations[0]["parameters"]
    (wire,) = parameters["properties"]
    assert GEMINI_NAME.fullmatch(wire)
    (call,) = exported.parse(_gemini_response({wire: "v"}, "t"))
    assert call.arguments == {name: "v"}
