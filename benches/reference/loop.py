#!/usr/bin/env python3
"""The Python reference loop the harness is measured against (docs/benchmarks.md).

The same router-first loop as `harness run --script`, written the way a Python harness
usually is: the scripted router reply is read as JSON text, a call in model text is found by
stripping a ``` fence with str.find and json.loads, the arguments are validated with the
`jsonschema` package, the tool comes from a dict dispatch table, and every step is one JSON
Lines trace line, flushed as the step ends. The tool does the same work as the calc plugin:
it parses and evaluates an arithmetic expression (here with `ast`, never eval).

Two modes of validation:
  per-call   jsonschema.validate(arguments, schema) at every call: the reference design. It
             checks the schema against its metaschema and builds a validator every time.
  compiled   one validator per tool, built once at start; iter_errors at every call.

Set-up (once; not run by CI):
  python3 -m venv /tmp/bench-venv
  /tmp/bench-venv/bin/pip install -r benches/reference/requirements.txt
Run:
  /tmp/bench-venv/bin/python benches/reference/loop.py --script S.jsonl --max-steps N \\
      --trace T.jsonl --mode compiled
It prints one JSON object on stdout: status, answer, steps, and the loop's own time.
"""

import argparse
import ast
import json
import operator
import sys
import time

import jsonschema

# The schemas the harness offers: `calculate` exactly as the calc plugin's manifest declares it
# (`harness plugins list --json`), and the harness's built-in `finish`.
CALCULATE_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "CalculateArgs",
    "description": "Arguments of `calculate`.",
    "type": "object",
    "properties": {
        "expression": {
            "description": "An arithmetic expression, e.g. `6*7` or `(1.5 + 2) / 4`.",
            "type": "string",
            "minLength": 1,
            "maxLength": 4096,
        }
    },
    "additionalProperties": False,
    "required": ["expression"],
}
FINISH_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"description": "The final answer: text or any JSON value."}},
    "required": ["answer"],
}

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Mod: operator.mod,
    ast.BitXor: operator.pow,  # `^` is a power, as in the calc plugin
    ast.Pow: operator.pow,
}


class ToolError(Exception):
    pass


def _evaluate(node):
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Div):
            if right == 0:
                raise ToolError("division by zero")
            if isinstance(left, int) and isinstance(right, int):
                return int(left / right)  # integer division truncates, as in the plugin
            return left / right
        op = _BINARY.get(type(node.op))
        if op is None:
            raise ToolError("not arithmetic")
        return op(left, right)
    raise ToolError("not arithmetic")


def calculate(arguments):
    expression = arguments["expression"]
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as e:
        raise ToolError(f"cannot evaluate {expression!r}: {e}") from None
    return _evaluate(tree)


# The dispatch table: tool name to (plugin, function).
TOOLS = {"calculate": ("calc", calculate)}
SCHEMAS = {"calculate": CALCULATE_SCHEMA, "finish": FINISH_SCHEMA}


def strip_fence(text):
    """The text inside the first ``` fence, or the text itself; str.find, no regex."""
    start = text.find("```")
    if start < 0:
        return text
    body = text.find("\n", start)
    if body < 0:
        return text
    end = text.find("```", body + 1)
    return text[body + 1 : end] if end >= 0 else text[body + 1 :]


def parse_reply(reply):
    """A call from a router reply: a structured call, or JSON in (fenced) text."""
    if "tool" in reply:
        name, arguments = reply["tool"], reply.get("arguments")
    else:
        text = strip_fence(reply.get("content", ""))
        try:
            call = json.loads(text)
        except json.JSONDecodeError:
            first, last = text.find("{"), text.rfind("}")
            if first < 0 or last < first:
                raise ValueError("no_json") from None
            call = json.loads(text[first : last + 1])
        name = call.get("tool") or call.get("name")
        arguments = call.get("arguments", call.get("parameters"))
    if isinstance(arguments, str):
        arguments = json.loads(arguments) if arguments.strip() else {}
    if arguments is None:
        arguments = {}
    return name, arguments


def make_validate(mode):
    if mode == "per-call":

        def validate(name, arguments):
            try:
                jsonschema.validate(arguments, SCHEMAS[name])
            except jsonschema.ValidationError as e:
                return [{"pointer": "/" + "/".join(map(str, e.absolute_path)), "message": e.message}]
            return []

        return validate
    validators = {}
    for name, schema in SCHEMAS.items():
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validators[name] = cls(schema)

    def validate(name, arguments):
        return [
            {"pointer": "/" + "/".join(map(str, e.absolute_path)), "message": e.message}
            for e in validators[name].iter_errors(arguments)
        ]

    return validate


def error(code, message, details):
    return {"code": code, "message": message, "details": details}


def run(script_path, max_steps, trace_path, mode):
    with open(script_path, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    validate = make_validate(mode)
    conversation = [{"role": "user", "content": "bench"}]
    status, answer, steps = "step_budget_exhausted", None, max_steps
    loop_started = time.perf_counter()
    with open(trace_path, "w", encoding="utf-8") as trace:
        for step in range(1, max_steps + 1):
            started = time.perf_counter_ns()
            finish_only = step == max_steps
            if step > len(lines):
                status, steps = "failed", step
                break
            reply = json.loads(lines[step - 1])  # the router's reply, as text from the API
            model_ns = time.perf_counter_ns() - started
            conversation.append({"role": "assistant", "reply": reply})
            entry = {"step": step, "tool": None, "arguments": None}
            result, err, step_status, plugin = None, None, "ok", None
            try:
                name, arguments = parse_reply(reply)
                entry["tool"], entry["arguments"] = name, arguments
            except (ValueError, json.JSONDecodeError) as e:
                name, arguments = None, None
                err, step_status = error("invalid_json", str(e), {}), "rejected"
            if err is None:
                if name not in SCHEMAS:
                    err, step_status = error("unknown_tool", f"there is no tool named {name!r}", {}), "rejected"
                elif finish_only and name != "finish":
                    err, step_status = error("tool_not_offered", "only finish is offered", {}), "rejected"
                else:
                    violations = validate(name, arguments)
                    if violations:
                        err = error("invalid_arguments", "the arguments do not match", {"violations": violations})
                        step_status = "rejected"
                    elif name == "finish":
                        result, step_status = arguments.get("answer"), "finished"
                    else:
                        plugin, function = TOOLS[name]
                        try:
                            result = function(arguments)
                        except ToolError as e:
                            err, step_status = error("tool_error", str(e), {"tool": name}), "error"
            entry["status"] = step_status
            if result is not None:
                entry["result"] = result
            if err is not None:
                entry["error"] = err
            if plugin is not None:
                entry["plugin"], entry["plugin_version"] = plugin, "0.1.0"
            entry["offered"] = "finish" if finish_only else "all"
            if "content" in reply:
                entry["reply_text"] = reply["content"]
            entry["duration_us"] = (time.perf_counter_ns() - started) // 1000
            entry["model_us"] = model_ns // 1000
            trace.write(json.dumps(entry, separators=(",", ":")) + "\n")
            trace.flush()
            if step_status == "finished":
                status, answer, steps = "finished", result, step
                break
            content = err if err is not None else result
            conversation.append({"role": "tool_result", "tool": name, "content": content, "is_error": err is not None})
    loop_seconds = time.perf_counter() - loop_started
    return {
        "status": status,
        "answer": answer,
        "steps": steps,
        "mode": mode,
        "loop_seconds": loop_seconds,
        "loop_us_per_step": loop_seconds * 1e6 / max(steps, 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--script", required=True)
    parser.add_argument("--max-steps", type=int, required=True)
    parser.add_argument("--trace", required=True)
    parser.add_argument("--mode", choices=["per-call", "compiled"], required=True)
    args = parser.parse_args()
    outcome = run(args.script, args.max_steps, args.trace, args.mode)
    print(json.dumps(outcome))
    return 0 if outcome["status"] == "finished" else 3


if __name__ == "__main__":
    sys.exit(main())
