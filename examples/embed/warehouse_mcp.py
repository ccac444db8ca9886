#!/usr/bin/env python3
# [embed:server]
# An MCP server over stdio (one JSON-RPC message per line) with two tools: stock_level, which the
# agent is meant to use, and reset_stock, which it is not. Any MCP server is wired the same way.
import json
import sys

stock = {"A-1": 7, "B-2": 0, "C-3": 12}
tools = [
    {"name": "stock_level", "description": "Units in stock for a SKU",
     "inputSchema": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}},
    {"name": "reset_stock", "description": "Sets a SKU's stock to zero",
     "inputSchema": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}},
]


def call(name, arguments):
    sku = arguments.get("sku", "")
    if sku not in stock:
        return {"content": [{"type": "text", "text": f"no SKU {sku}"}], "isError": True}
    if name == "reset_stock":
        stock[sku] = 0
    answer = {"sku": sku, "units": stock[sku]}
    return {"content": [{"type": "text", "text": json.dumps(answer)}], "structuredContent": answer}


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue  # a notification (notifications/initialized): nothing to answer
    method, params = message.get("method"), message.get("params", {})
    if method == "initialize":
        result = {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "warehouse", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": tools}
    elif method == "tools/call" and params.get("name") in ("stock_level", "reset_stock"):
        result = call(params["name"], params.get("arguments", {}))
    elif method == "ping":
        result = {}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                          "error": {"code": -32601, "message": f"no method {method}"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
# [/embed:server]
