#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/<name>).

The seeds are committed; run this again only to change them. MQTT packets are written out from
the byte layouts of the MQTT 5.0 standard, without the codec; JSON-RPC messages, HTTP requests,
topics and configurations are the ones MCP clients, servers and the tests use, and the
configuration files of the repository; access tokens and JWK Sets are those an authorization
server issues, and the mistakes the token core refuses. Regression inputs that a fuzz run found
are committed by hand next to these (named regression-*), and this script leaves them alone.
"""
import base64
import json
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def vbi(n):
    out = bytearray()
    while True:
        digit, n = n % 128, n // 128
        out.append(digit | (0x80 if n else 0))
        if not n:
            return bytes(out)


def s16(text):
    data = text.encode() if isinstance(text, str) else text
    return struct.pack(">H", len(data)) + data


def props(*parts):
    content = b"".join(parts)
    return vbi(len(content)) + content


def packet(first, *parts):
    body = b"".join(parts)
    return bytes([first]) + vbi(len(body)) + body


def user(key, value):
    return b"\x26" + s16(key) + s16(value)


def u16(n):
    return struct.pack(">H", n)


def u32(n):
    return struct.pack(">I", n)


CONNACK_ALL = packet(0x20, b"\x01\x00", props(
    b"\x11" + u32(120), b"\x21" + u16(20), b"\x24\x01", b"\x25\x00", b"\x27" + u32(4096),
    b"\x12" + s16("cid"), b"\x22" + u16(10), b"\x1f" + s16("ok"), user("a", "1"), b"\x28\x00",
    b"\x29\x01", b"\x2a\x00", b"\x13" + u16(30), b"\x1a" + s16("resp"), b"\x1c" + s16("srv"),
    b"\x15" + s16("SCRAM"), b"\x16" + s16(b"\x01\x02"), user("b", "2")))
PUBLISH_ALL = packet(0x3A, s16("r/1"), u16(7), props(
    b"\x01\x01", b"\x02" + u32(60), b"\x23" + u16(5), b"\x08" + s16("reply/to"),
    b"\x09" + s16(b"\xab\xcd"), user("x", "y"), b"\x0b\x01", b"\x0b\xff\xff\xff\x7f",
    b"\x03" + s16("application/json")), b"{\"jsonrpc\":\"2.0\"}")
PUBLISH_QOS0 = packet(0x31, s16("a/b"), b"\x00", b"hello")
PUBLISH_QOS2 = packet(0x34, s16("caf\u00e9/\u20ac"), u16(0xFFFF), props(user("k", "v")), b"x")
ALIAS_DEFINE = packet(0x30, s16("long/topic/name"), props(b"\x23" + u16(1)), b"1")
ALIAS_USE = packet(0x30, s16(""), props(b"\x23" + u16(1)), b"2")
PUBACK = bytes.fromhex("40 02 12 34")
PUBREC = bytes.fromhex("50 03 00 01 10")
PUBREL = packet(0x62, u16(2), b"\x92", props(b"\x1f" + s16("gone"), user("k", "v")))
PUBCOMP = bytes.fromhex("70 04 00 03 00 00")
SUBACK = packet(0x90, u16(10), props(b"\x1f" + s16("partly")),
                bytes.fromhex("00 01 02 80 83 87 8F 91 97 9E A1 A2"))
UNSUBACK = packet(0xB0, u16(11), props(user("k", "v")), bytes.fromhex("00 11 80 83 87 8F 91"))
PINGRESP = bytes.fromhex("D0 00")
DISCONNECT = packet(0xE0, b"\x9c", props(b"\x1f" + s16("moving"), b"\x1c" + s16("other:1883"),
                                         user("k", "v")))
AUTH = packet(0xF0, b"\x18", props(b"\x15" + s16("SCRAM-SHA-1"), b"\x16" + s16(b"\x01\x02"),
                                   b"\x1f" + s16("more"), user("k", "v")))

# First byte of a stream seed: Maximum Packet Size 2^(high nibble) or none, Topic Alias Maximum
# (low nibble, 15: 300).
NO_LIMIT = b"\x0a"
LIMITS = b"\xcf"

STREAM = {
    "connack-all-properties": NO_LIMIT + CONNACK_ALL,
    "connack-refused": NO_LIMIT + bytes.fromhex("20 03 00 87 00"),
    "connack-mqtt311": NO_LIMIT + bytes.fromhex("20 02 00 05"),
    "publish-qos0": NO_LIMIT + PUBLISH_QOS0,
    "publish-qos1-all-properties": NO_LIMIT + PUBLISH_ALL,
    "publish-qos2-utf8": LIMITS + PUBLISH_QOS2,
    "publish-alias-define-and-use": NO_LIMIT + ALIAS_DEFINE + ALIAS_USE + ALIAS_USE,
    "publish-alias-undefined": NO_LIMIT + ALIAS_USE,
    "publish-alias-300": LIMITS + packet(0x30, s16("t"), props(b"\x23" + u16(300))) +
                         packet(0x30, s16(""), props(b"\x23" + u16(300))) +
                         packet(0x30, s16(""), props(b"\x23" + u16(301))),
    "acks": NO_LIMIT + PUBACK + PUBREC + PUBREL + PUBCOMP,
    "suback-unsuback": NO_LIMIT + SUBACK + UNSUBACK,
    "pingresp": NO_LIMIT + PINGRESP,
    "disconnect": NO_LIMIT + DISCONNECT,
    "disconnect-short": NO_LIMIT + bytes.fromhex("E0 00"),
    "auth": NO_LIMIT + AUTH,
    "session": LIMITS + CONNACK_ALL + SUBACK + ALIAS_DEFINE + PUBLISH_ALL + ALIAS_USE + PUBREL +
               PINGRESP + UNSUBACK + DISCONNECT,
    # Nasty ones.
    "remaining-length-5-bytes": NO_LIMIT + bytes.fromhex("30 80 80 80 80 01"),
    "remaining-length-not-shortest": NO_LIMIT + bytes.fromhex("D0 80 00"),
    "remaining-length-largest": NO_LIMIT + bytes.fromhex("30 FF FF FF 7F 00 01 74 00"),
    "too-large-for-limit": b"\x40" + PUBLISH_ALL,
    "type-0": NO_LIMIT + bytes.fromhex("00 00"),
    "connect-from-broker": NO_LIMIT + packet(0x10, s16("MQTT"), b"\x05\x02\x00\x00\x00", s16("")),
    "publish-qos3": NO_LIMIT + packet(0x36, s16("t"), u16(1), b"\x00"),
    "publish-dup-qos0": NO_LIMIT + packet(0x38, s16("t"), b"\x00"),
    "publish-id-0": NO_LIMIT + packet(0x32, s16("t"), u16(0), b"\x00"),
    "publish-wildcard": NO_LIMIT + packet(0x30, s16("a/+/#"), b"\x00"),
    "publish-bad-utf8": NO_LIMIT + packet(0x30, s16(b"\xed\xa0\x80\xc0\x80"), b"\x00"),
    "publish-nul": NO_LIMIT + packet(0x30, s16(b"a\x00b"), b"\x00"),
    "property-twice": NO_LIMIT + packet(0x30, s16("t"), props(b"\x23" + u16(1), b"\x23" + u16(1))),
    "property-not-allowed": NO_LIMIT + packet(0x40, u16(1), b"\x00", props(b"\x11" + u32(1))),
    "property-length-past-end": NO_LIMIT + bytes.fromhex("20 05 00 00 09 21 00"),
    "property-value-past-block": NO_LIMIT + bytes.fromhex("20 06 00 00 02 27 00 00"),
    "subscription-id-0": NO_LIMIT + packet(0x30, s16("t"), props(b"\x0b\x00")),
    "subscription-id-5-bytes": NO_LIMIT + packet(0x30, s16("t"), props(b"\x0b\x80\x80\x80\x80\x01")),
    "receive-maximum-0": NO_LIMIT + packet(0x20, b"\x00\x00", props(b"\x21" + u16(0))),
    "connack-flags": NO_LIMIT + bytes.fromhex("20 03 02 00 00"),
    "pubrel-flags": NO_LIMIT + bytes.fromhex("60 02 00 01"),
    "suback-empty": NO_LIMIT + bytes.fromhex("90 03 00 01 00"),
    "pingresp-body": NO_LIMIT + bytes.fromhex("D0 01 00"),
    "disconnect-session-expiry": NO_LIMIT + packet(0xE0, b"\x00", props(b"\x11" + u32(0))),
    "auth-no-method": NO_LIMIT + packet(0xF0, b"\x18", props(b"\x16" + s16("d"))),
    "trailing-bytes": NO_LIMIT + bytes.fromhex("40 05 00 01 00 00 00"),
    "cut-short": NO_LIMIT + PUBLISH_ALL[: len(PUBLISH_ALL) // 2],
}

PRIMITIVES = {
    "varint-0": b"\x00",
    "varint-127": b"\x7f",
    "varint-128": b"\x80\x01",
    "varint-16383": b"\xff\x7f",
    "varint-16384": b"\x80\x80\x01",
    "varint-2097151": b"\xff\xff\x7f",
    "varint-2097152": b"\x80\x80\x80\x01",
    "varint-268435455": b"\xff\xff\xff\x7f",
    "varint-5-bytes": b"\x80\x80\x80\x80\x01",
    "varint-not-shortest": b"\x80\x00",
    "utf8-ascii": b"sport/tennis/player1/ranking",
    "utf8-all-lengths": "a\u00e9\u0800\ud7ff\ue000\uffff\U00010000\U0010ffff/x".encode(),
    "utf8-offsets": b"abcdefg\xc3\xa9hijklm\xe2\x82\xacnopqrs\xf0\x9f\x98\x80tuvwxyz",
    "utf8-overlong": b"abcdefgh\xc0\x80\xe0\x80\x80\xf0\x80\x80\x80",
    "utf8-surrogate": b"abcdefgh\xed\xa0\x80",
    "utf8-above-10ffff": b"\xf4\x90\x80\x80",
    "utf8-cut": b"abcdefgh\xe2\x82",
    "utf8-nul": b"abcdefgh\x00abcdefgh",
    "topic-wildcards": b"sport/+/player/#",
}


# ---- JSON-RPC and MCP ---------------------------------------------------------------------------

INITIALIZE = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
              '"2025-11-25","capabilities":{"sampling":{},"roots":{"listChanged":true}},'
              '"clientInfo":{"name":"inspector","version":"0.16.2"}}}')
INITIALIZED = '{"jsonrpc":"2.0","method":"notifications/initialized"}'
TOOLS_LIST = '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}'
TOOL_CALL = ('{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":{"name":"echo",'
             '"arguments":{"text":"hello"},"_meta":{"progressToken":"tok-1"}}}')
MODERN_META = ('"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
               '"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},'
               '"io.modelcontextprotocol/clientInfo":{"name":"sdk2","version":"2.4.0"},'
               '"io.modelcontextprotocol/logLevel":"info","progressToken":9}')
MODERN_CALL = ('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get weather",'
               '"arguments":{"city":"Z\u00fcrich"},' + MODERN_META + '}}')
MODERN_READ = ('{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":'
               '"file:///caf\u00e9.txt",' + MODERN_META + '}}')
MODERN_DISCOVER = ('{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{' +
                   MODERN_META + '}}')
LISTEN = ('{"jsonrpc":"2.0","id":"l1","method":"subscriptions/listen","params":{"notifications":'
          '{"toolsListChanged":true,"resourceSubscriptions":["file:///a"]},' + MODERN_META + '}}')

JSONRPC = {
    "initialize": INITIALIZE,
    "initialized": INITIALIZED,
    "tools-list": TOOLS_LIST,
    "tools-call-progress-token": TOOL_CALL,
    "progress": '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":'
                '"tok-1","progress":1,"total":2,"message":"half"}}',
    "result": '{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo","inputSchema":'
              '{"type":"object","properties":{"text":{"type":"string"}}}}],"nextCursor":"c2"}}',
    "result-cacheable": '{"jsonrpc":"2.0","id":4,"result":{"contents":[{"uri":"file:///a",'
                        '"text":"x"}],"ttlMs":1000,"_meta":{"k":1}}}',
    "result-input-required": '{"jsonrpc":"2.0","id":3,"result":{"resultType":"input_required",'
                             '"inputRequests":{"a":{"method":"elicitation/create"}}}}',
    "error-with-data": '{"jsonrpc":"2.0","id":"call-7","error":{"code":-32602,"message":'
                       '"Invalid params","data":{"field":"name","got":[1,2.5e-3,null]}}}',
    "error-null-id": '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}',
    "sampling-request": '{"jsonrpc":"2.0","id":"srv-1","method":"sampling/createMessage",'
                        '"params":{"messages":[{"role":"user","content":{"type":"text",'
                        '"text":"hi"}}],"maxTokens":10}}',
    "cancelled": '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":'
                 '"call-7","reason":"user"}}',
    "batch": "[" + TOOLS_LIST + ",\r\n " + INITIALIZED + "," + TOOL_CALL + "]",
    "batch-empty": "[]",
    "batch-nested": '[[' + TOOLS_LIST + ']]',
    "modern-tools-call": MODERN_CALL,
    "modern-resources-read": MODERN_READ,
    "modern-discover": MODERN_DISCOVER,
    "modern-listen": LISTEN,
    "modern-notification": '{"jsonrpc":"2.0","method":"notifications/resources/updated","params":'
                           '{"uri":"file:///a","_meta":{"io.modelcontextprotocol/subscriptionId":'
                           '"l1"}}}',
    "modern-bad-envelope": '{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"_meta":'
                           '{"io.modelcontextprotocol/protocolVersion":2026}}}',
    "line-breaks": '{\r\n "jsonrpc": "2.0",\n "id": 8,\n "method": "ping"\n}\n',
    "unicode-escapes": '{"jsonrpc":"2.0","id":"\\u00e9\\ud83d\\ude00","method":"x/\\u0000"}',
    "numbers": '{"jsonrpc":"2.0","id":-9223372036854775808,"result":{"a":1e308,"b":-0.0,'
               '"c":123456789012345678901234567890,"d":0.1}}',
    "duplicate-member": '{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
    "not-json-rpc": '{"foo":1}',
    "truncated": TOOL_CALL[:40],
    "deep": '{"jsonrpc":"2.0","method":"x","params":' + '[' * 120 + ']' * 120 + '}',
    "long-jsonrpc": '{"jsonrpc":"' + '\u00e9' * 20 + '","method":"x"}',
}


def http_request(method, target, headers, body=""):
    data = body.encode() if isinstance(body, str) else body
    lines = [f"{method} {target} HTTP/1.1"]
    lines += [f"{k}: {v}" for k, v in headers]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(data)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


HOST = ("Host", "127.0.0.1:8080")
POST_HEADERS = [HOST, ("Accept", "application/json, text/event-stream"),
                ("Content-Type", "application/json")]
MODERN_HEADERS = POST_HEADERS + [("MCP-Protocol-Version", "2026-07-28"),
                                 ("Mcp-Method", "tools/call"),
                                 ("Mcp-Name", "=?base64?Z2V0IHdlYXRoZXI=?=")]


def with_session(headers, sid="@@SID@@", version="2025-11-25"):
    return headers + [("Mcp-Session-Id", sid), ("MCP-Protocol-Version", version)]


HTTP = {
    "post-initialize": http_request("POST", "/mcp", POST_HEADERS, INITIALIZE),
    "post-initialized": http_request("POST", "/mcp", with_session(POST_HEADERS, "0" * 32),
                                     INITIALIZED),
    "post-by-name-encoded": http_request("POST", "/servers/demo%2Feverything/mcp?x=1",
                                         POST_HEADERS, INITIALIZE),
    "post-by-name-segments": http_request("POST", "/servers/tools/weather/mcp", POST_HEADERS,
                                          TOOLS_LIST),
    "post-batch": http_request("POST", "/mcp", with_session(POST_HEADERS, "a" * 32),
                               JSONRPC["batch"]),
    "post-modern": http_request("POST", "/mcp", MODERN_HEADERS, MODERN_CALL),
    "post-modern-read": http_request("POST", "/mcp", POST_HEADERS + [
        ("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "resources/read"),
        ("Mcp-Name", "=?base64?ZmlsZTovLy9jYWbDqS50eHQ=?=")], MODERN_READ),
    "get-stream": http_request("GET", "/mcp", [HOST, ("Accept", "text/event-stream"),
                                               ("Mcp-Session-Id", "b" * 32)]),
    "get-resume": http_request("GET", "/mcp", [HOST, ("Accept", "text/event-stream"),
                                               ("Mcp-Session-Id", "b" * 32),
                                               ("Last-Event-ID", "1-2")]),
    "delete": http_request("DELETE", "/mcp", [HOST, ("Mcp-Session-Id", "c" * 32)]),
    "options-preflight": http_request("OPTIONS", "/mcp", [
        HOST, ("Origin", "https://app.example"), ("Access-Control-Request-Method", "POST")]),
    "origin-and-token": http_request("POST", "/mcp", POST_HEADERS + [
        ("Origin", "http://localhost:6274"), ("Authorization", "Bearer s3cret")], TOOLS_LIST),
    "host-ipv6": http_request("GET", "/servers", [("Host", "[::1]:8080")]),
    "health": http_request("GET", "/healthz", [HOST]) + http_request("HEAD", "/readyz", [HOST]) +
              http_request("GET", "/metrics", [HOST]),
    "expect-continue": http_request("POST", "/mcp", POST_HEADERS + [("Expect", "100-continue")],
                                    INITIALIZE),
    "chunked": ("POST /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: application/json, "
                "text/event-stream\r\nContent-Type: application/json; charset=utf-8\r\n"
                "Transfer-Encoding: chunked\r\n\r\n10\r\n" + INITIALIZE[:16] + "\r\n" +
                format(len(INITIALIZE) - 16, "x") + "\r\n" + INITIALIZE[16:] +
                "\r\n0\r\n\r\n").encode(),
    "http10": b"GET /mcp HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
    "not-http": b"NOT HTTP AT ALL\r\n\r\n",
    "unknown-route": http_request("GET", "/nope/%ff", [HOST]),
    "bad-server-name": http_request("POST", "/servers/a/+/%00/mcp", POST_HEADERS, TOOLS_LIST),
}


def session_flow(config, *segments):
    return bytes([config]) + b"@@NEXT@@".join(segments)


SID_HEADERS = with_session(POST_HEADERS)
HTTP_SERVER = {
    "initialize-then-call": session_flow(
        0, http_request("POST", "/mcp", POST_HEADERS, INITIALIZE),
        http_request("POST", "/mcp", SID_HEADERS, INITIALIZED) +
        http_request("POST", "/mcp", SID_HEADERS, TOOL_CALL.replace('"echo"', '"progress"')) +
        http_request("POST", "/mcp", SID_HEADERS, JSONRPC["batch"]) +
        http_request("DELETE", "/mcp", [HOST, ("Mcp-Session-Id", "@@SID@@")])),
    "get-stream-and-notify": session_flow(
        0, http_request("POST", "/servers/demo/everything/mcp", POST_HEADERS, INITIALIZE),
        http_request("GET", "/servers/demo/everything/mcp",
                     [HOST, ("Accept", "text/event-stream"), ("Mcp-Session-Id", "@@SID@@")]),
        http_request("POST", "/servers/demo/everything/mcp", SID_HEADERS,
                     TOOL_CALL.replace('"echo"', '"notify"')),
        http_request("GET", "/servers/demo/everything/mcp",
                     [HOST, ("Accept", "text/event-stream"), ("Mcp-Session-Id", "@@SID@@")])),
    "resume": session_flow(
        0, http_request("POST", "/mcp", POST_HEADERS, INITIALIZE),
        http_request("POST", "/mcp", SID_HEADERS, TOOL_CALL.replace('"echo"', '"sample"')),
        http_request("GET", "/mcp", [HOST, ("Accept", "text/event-stream"),
                                     ("Mcp-Session-Id", "@@SID@@"), ("Last-Event-ID", "@@EID@@")])),
    "json-responses": session_flow(
        1, http_request("POST", "/mcp", POST_HEADERS + [("Origin", "https://app.example")],
                        INITIALIZE),
        http_request("POST", "/mcp", SID_HEADERS, JSONRPC["batch"]) +
        http_request("POST", "/mcp", with_session(POST_HEADERS), TOOL_CALL)),
    "tokens-and-limits": session_flow(
        2, http_request("POST", "/mcp", POST_HEADERS + [("Authorization", "Bearer s3cret")],
                        INITIALIZE),
        http_request("POST", "/mcp", SID_HEADERS + [("Authorization", "bearer s3cret")],
                     TOOL_CALL.replace('"echo"', '"slow"')),
        http_request("POST", "/mcp", POST_HEADERS, "x" * 2000)),
    "no-default-server": session_flow(
        3, http_request("POST", "/mcp", POST_HEADERS, INITIALIZE),
        http_request("POST", "/servers/offline/x/mcp", POST_HEADERS, INITIALIZE),
        http_request("POST", "/servers/silent/x/mcp", POST_HEADERS, INITIALIZE),
        http_request("POST", "/servers/lazy/x/mcp", POST_HEADERS, INITIALIZE)),
    "server-closes": session_flow(
        0, http_request("POST", "/mcp", POST_HEADERS, INITIALIZE),
        http_request("POST", "/mcp", SID_HEADERS, TOOL_CALL.replace('"echo"', '"slow"')),
        http_request("POST", "/mcp", SID_HEADERS, TOOL_CALL.replace('"echo"', '"close"')
                     .replace("call-7", "call-8"))),
    "pipelined-and-refused": session_flow(
        0, http_request("GET", "/healthz", [HOST]) +
        http_request("POST", "/mcp", [("Host", "evil.example")], INITIALIZE) +
        http_request("POST", "/mcp", POST_HEADERS[:2], INITIALIZE) +
        http_request("PUT", "/mcp", [HOST], "{}") + b"NOT HTTP\r\n\r\n"),
}
for name, seed in HTTP.items():
    HTTP_SERVER["request-" + name] = b"\x00" + seed

# ---- topics ----------------------------------------------------------------------------------------

TOPICS = {
    "server-control": "$mcp-server/sid-1/demo/everything",
    "server-capability": "$mcp-server/capability/sid-1/demo/everything",
    "server-presence": "$mcp-server/presence/sid-1/tools/weather",
    "client-presence": "$mcp-client/presence/mcp-bridge-5f2c",
    "client-capability": "$mcp-client/capability/mcp-bridge-5f2c",
    "rpc": "$mcp-rpc/mcp-bridge-5f2c/sid-1/demo/everything",
    "rpc-utf8": "$mcp-rpc/c\u00e9/s\u20ac/\u65e5\u672c/\U0001f600",
    "presence-filter": "$mcp-server/presence/+/demo/#",
    "parts-valid": "sid-1\ndemo/everything\nmcp-bridge-5f2c",
    "parts-reserved": "capability\ntype/sub-type/name\nclient",
    "parts-filter": "demo/+/#\ndemo/a/b\nx",
    "parts-filter-parent": "a/#\na\nx",
    "parts-bad-utf8": b"s\xed\xb3\xbf\nn\xc0\x80\nc",
    "empty-levels": "$mcp-server/sid//name/",
}

# ---- configuration ---------------------------------------------------------------------------------


def repo_file(path):
    with open(os.path.join(HERE, "..", "..", path), "rb") as f:
        return f.read()


CONFIG = {
    "bridge.example.jsonc": repo_file("config/bridge.example.jsonc"),
    "docker-bridge.jsonc": repo_file("docker/bridge.jsonc"),
    "systemd-bridge.jsonc": repo_file("systemd/bridge.jsonc"),
    "ingress-test": ('{"mqtt": {"url": "mqtt://127.0.0.1:41883"}, "http": {"listen": '
                     '"127.0.0.1:41080", "limits": {"max_sessions": 2}}, "ingress": '
                     '{"default_server": "demo/everything", "presence_wait_ms": 1000}, '
                     '"mcpServers": {}}').encode(),
    "servers": ('{"mcpServers": {"demo/everything": {"command": "npx", "args": ["-y", '
                '"@modelcontextprotocol/server-everything"], "env": {"A": "1"}, "cwd": "/tmp", '
                '"description": "The MCP reference server", "meta": {"k": [1]}},\n'
                '"tools/weather": {"url": "https://weather.example/mcp", "headers": '
                '{"Authorization": "Bearer ${WEATHER_TOKEN}"}, "type": "streamable-http"},\n'
                '"off/x": {"command": "x", "disabled": true}}}').encode(),
    "environment-and-flags": ("MCPMQTT_BROKER=wss://broker.example:8884/mqtt\n"
                              "MCPMQTT_LOG_LEVEL=debug\nWEATHER_TOKEN=abc\n"
                              "MCPMQTT_MQTT_USERNAME=u\nMCPMQTT_MQTT_PASSWORD=p\n"
                              "--listen [::1]:0\n--server tools/weather\n"
                              "--presence-wait-ms 250\n---\n"
                              '{"mqtt": {"tls": {"verify": false}}, "mcpServers": '
                              '{"tools/weather": {"url": "http://127.0.0.1:9000/mcp", '
                              '"headers": {"X": "${WEATHER_TOKEN}"}}}}').encode(),
    "mistakes": ('// comment\n{"mqtt": {"ulr": "mqtt://x", "qos": 2, "keepalive_s": 2.5,},\n'
                 '"http": {"listen": "nohost", "limits": {"max_body_bytes": 10}},\n'
                 '"ingress": {"server_name_filters": ["a/#/b", "+x"], "pick": "first"},\n'
                 '"timeouts": {"tools/call": 0, "default": 90.5},\n'
                 '"log": {"level": "loud"}, "daemon": {"threads": 0},\n'
                 '"mcpServers": {"bad//name": {"command": "x", "url": "http://y"}},\n'
                 '"mqtt": {}, /* trailing */ }').encode(),
    "not-json": b"{\"mqtt\": {\"url\": \"mqtt://x\"",
}

# ---- access tokens and JWK Sets -----------------------------------------------------------------

# The public keys of jwt_fuzzer.cpp's JWK Set literal (kids rsa, ec, ed). Their private halves
# signed SIGNED_TOKENS once and were discarded: these tokens cannot be made again, only kept.
JWK_RSA = ('{"kty":"RSA","kid":"rsa","n":"vzEZJKXOmcxWFbXLfIu9He5WweNjTlRy7B19SUVs4ZH2zKZuV3hNeD'
           'WJtwQyii8jpUenisZSAqA6kPWu8NICLtyFoowBhvY0LvPqnMq0np9-Z5ozaVefu2CYU7uaS_iolepAbe5BCWz'
           'v_QJtk2xI3znomIVDy3z798PrqjUPUSiNGETIDjCQCrmENPAIwhwyaUtp6I3O0-q652aeQ6IFtDkqeuYqSIdT'
           'nheYsp_4vI0dDXBWJbDYAl6kTAvfTWToChcUB1IfFjevuN_DriJWWbu4ogui3Q_q5tauxqDZHukHgMP4IbYwn'
           'hi15fmsDROpx_k8N5oyH4YduoinIvpWJQ","e":"AQAB"}')
JWK_EC = ('{"kty":"EC","kid":"ec","crv":"P-256","alg":"ES256","use":"sig",'
          '"x":"mfF_7NTmCVXk2utZbT8whIAvfD-wWF8QarB101P85zU",'
          '"y":"T3vZY7X_mOMe1GgkwX_SuxpCDWJQanutK7-HsLa4pYw"}')
JWK_ED = ('{"kty":"OKP","kid":"ed","crv":"Ed25519","alg":"EdDSA",'
          '"x":"7K8njtKEAy7MnihIUojrFxFiRvE6hRZsCnaJD-YSbhU"}')
JWK_OCT = '{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}'

SIGNED_TOKENS = {
    "RS256": (
        "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzYSIsInR5cCI6ImF0K2p3dCJ9.eyJpc3MiOiJodHRwczovL2lzc3Vlci5"
        "mdXp6Iiwic3ViIjoidXNlci0xIiwiYXVkIjoiaHR0cHM6Ly9icmlkZ2UuZnV6ei9tY3AiLCJpYXQiOjE4OTk5OTk"
        "5OTAsImV4cCI6MTkwMDAwMDMwMCwic2NvcGUiOiJtY3A6d2VhdGhlciBtY3A6YWxsIiwiY2xpZW50X2lkIjoiZnV"
        "6ei1jbGllbnQifQ.uNrOynNUP1CR5Gt5UAhSzsZc6Kbu_jCXuZK1ayzXwRA0pYA0YoIF-Qlp_y0_3kcZwQBCdcuI"
        "VxPCInKYSB2BXI9vdciFB-oPQcM-_RteeOZXNJhIQUoAp5yF1o3a_lNC5ByWB2Jkb5Bde6fOWdQbijD04VgpVvF3"
        "qV7HSw48fAlergaTt92XB8Mtl8xK6iAjY4J8OPOwCgX1UFENgITbYs_UZjICTmk48xjgmtSOXi7fswojRyfZJLf2"
        "XGwIVpyMhc-TI8PduWYmOHYuViMuBKve16Aox40h37Zkkhzo0JL_XvGhEAk402YP-vk2yxf0Ty_7A9n0C-2daT5i"
        "O91jng"),
    "PS256": (
        "eyJhbGciOiJQUzI1NiIsImtpZCI6InJzYSIsInR5cCI6ImF0K2p3dCJ9.eyJpc3MiOiJodHRwczovL2lzc3Vlci5"
        "mdXp6Iiwic3ViIjoidXNlci0xIiwiYXVkIjoiaHR0cHM6Ly9icmlkZ2UuZnV6ei9tY3AiLCJpYXQiOjE4OTk5OTk"
        "5OTAsImV4cCI6MTkwMDAwMDMwMCwic2NvcGUiOiJtY3A6d2VhdGhlciBtY3A6YWxsIiwiY2xpZW50X2lkIjoiZnV"
        "6ei1jbGllbnQifQ.su_S-_K9deSZTZkd4-7gzz_MCKiYFjzFR2TNcevaxqDl-1kXexEK8mzm7CEVoUxaWnsfBhID"
        "gfdPsbB5jLJVBs6hENugKagtnKgPjaLXfqhWxKaYNuHEoy32ybq8zFVLyp9fhryO1OhnbPXdqOPYx-IWUjyvnN89"
        "2vEtKKPGqqgjuz5LfXNd-lb_22RMLb0zscwzdzDdH4f42jgUp4f0tfpiPNlTq2DAggQjPgrUH3SEUGntfspYw7-t"
        "RprtKEDk0We2_82iNw-QYwfbFHguztN2EJKtv2CaRB0vOV-fb9Q1t7KOGq6papMbUbVDzX1hHDN58RzWjPus5tqw"
        "kLN1VQ"),
    "ES256": (
        "eyJhbGciOiJFUzI1NiIsImtpZCI6ImVjIiwidHlwIjoiYXQrand0In0.eyJpc3MiOiJodHRwczovL2lzc3Vlci5m"
        "dXp6Iiwic3ViIjoidXNlci0xIiwiYXVkIjoiaHR0cHM6Ly9icmlkZ2UuZnV6ei9tY3AiLCJpYXQiOjE4OTk5OTk5"
        "OTAsImV4cCI6MTkwMDAwMDMwMCwic2NvcGUiOiJtY3A6d2VhdGhlciBtY3A6YWxsIiwiY2xpZW50X2lkIjoiZnV6"
        "ei1jbGllbnQifQ.9Hbzc1WiXpA90uenVbr8MEJcB_Bv5U7ilhCt7mNG63x5A1zahBsOTy3zd4Bq1cl8_NrsjzgLh"
        "-P1ERkFWd5Pfg"),
    "EdDSA": (
        "eyJhbGciOiJFZERTQSIsImtpZCI6ImVkIiwidHlwIjoiYXQrand0In0.eyJpc3MiOiJodHRwczovL2lzc3Vlci5m"
        "dXp6Iiwic3ViIjoidXNlci0xIiwiYXVkIjoiaHR0cHM6Ly9icmlkZ2UuZnV6ei9tY3AiLCJpYXQiOjE4OTk5OTk5"
        "OTAsImV4cCI6MTkwMDAwMDMwMCwic2NvcGUiOiJtY3A6d2VhdGhlciBtY3A6YWxsIiwiY2xpZW50X2lkIjoiZnV6"
        "ei1jbGllbnQifQ.E3pDX2jQ0Y2ZET7C1LLD5-HjvoWzmMvhE-LFAc3D6JX6BySRgLyjf0lfsa-pcGfkrpj0p4vUh"
        "42iLhD3cTb2Dg"),
}


def b64url(data):
    data = data.encode() if isinstance(data, str) else data
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(header, claims, signature=b"\x00" * 64):
    h = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
    c = claims if isinstance(claims, str) else json.dumps(claims, separators=(",", ":"))
    return b64url(h) + "." + b64url(c) + "." + b64url(signature)


NOW = 1900000000  # jwt_fuzzer.cpp's clock
CLAIMS = {"iss": "https://issuer.fuzz", "sub": "user-1", "aud": "https://bridge.fuzz/mcp",
          "iat": NOW - 10, "exp": NOW + 300, "scope": "mcp:weather mcp:all"}


def claims(**changes):
    out = dict(CLAIMS)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def header(alg="ES256", kid="ec", typ="at+jwt", **extra):
    out = {"alg": alg}
    if kid is not None:
        out["kid"] = kid
    if typ is not None:
        out["typ"] = typ
    out.update(extra)
    return out


# First byte: jwt_fuzzer.cpp's settings (bit 0: signed by the fuzzer's issuer; bit 1: typ not
# required; bits 2-3: the allow-list; bits 4-5: the clock skew).
SIGN = 1
JWT = {f"signed-{alg.lower()}": b"\x00" + t.encode() for alg, t in SIGNED_TOKENS.items()}
JWT.update({
    "signed-rs256-rsa-only": b"\x04" + SIGNED_TOKENS["RS256"].encode(),
    "signed-es256-no-skew": b"\x10" + SIGNED_TOKENS["ES256"].encode(),
    "signed-ps256-not-allowed": b"\x08" + SIGNED_TOKENS["PS256"].encode(),
    "tampered": b"\x00" + SIGNED_TOKENS["EdDSA"][:-2].encode() + b"Dw",
})
RESIGNED = {
    "es256": token(header(), claims()),
    "rs256": token(header("RS256", "rsa"), claims()),
    "ps256-aud-array": token(header("PS256", "rsa"), claims(aud=["x", "https://bridge.fuzz"])),
    "eddsa-scp": token(header("EdDSA", "ed"), claims(scope=None, scp=["mcp:a", "mcp:b"])),
    "no-kid": token(header(kid=None), claims()),
    "typ-application": token(header(typ="application/at+jwt"), claims()),
    "typ-jwt": token(header(typ="JWT"), claims()),
    "no-typ": token(header(typ=None), claims()),
    "expired": token(header(), claims(exp=NOW - 61)),
    "exp-at-skew": token(header(), claims(exp=NOW - 59)),
    "exp-fraction": token(header(), claims(exp=NOW + 0.5)),
    "exp-huge": token(header(), '{"iss":"https://issuer.fuzz","sub":"s","aud":"https://bridge.fuzz",'
                                '"exp":1e300}'),
    "exp-string": token(header(), claims(exp="soon")),
    "nbf-future": token(header(), claims(nbf=NOW + 61)),
    "nbf-at-skew": token(header(), claims(nbf=NOW + 60)),
    "wrong-issuer": token(header(), claims(iss="https://issuer.fuzz/")),
    "wrong-audience": token(header(), claims(aud=["a", "b"])),
    "no-sub": token(header(), claims(sub=None)),
    "client-id": token(header(), claims(client_id="c")),
    "iat-string": token(header(), claims(iat="x")),
    "scope-bad": token(header(), claims(scope="a\tb")),
    "claims-dup": token(header(), '{"iss":"https://issuer.fuzz","iss":"x"}'),
    "claims-array": token(header(), "[]"),
    "crit": token(header(crit=["exp"]), claims()),
    "alg-none": b64url('{"alg":"none"}') + "." + b64url(json.dumps(claims())) + ".",
    "alg-hs256": token(header("HS256", "rsa"), claims(), b"\x01" * 32),
    "alg-unknown": token(header("RS384", "rsa"), claims()),
    "jwe": "eyJhbGciOiJSU0EtT0FFUCJ9.a.b.c.d",
    "deep": token(header(), "[" * 2000),
    "not-base64": "e30=.e30.e30",
}
for name, t in RESIGNED.items():
    JWT["resign-" + name] = bytes([SIGN]) + t.encode()
JWT["resign-rs256-typ-optional"] = bytes([SIGN | 2]) + RESIGNED["no-typ"].encode()
JWT["resign-eddsa-skew-300"] = bytes([SIGN | 0x20]) + RESIGNED["nbf-future"].encode()


def jwks(*keys):
    return '{"keys":[' + ",".join(keys) + "]}"


def with_member(jwk, name, value):
    d = json.loads(jwk)
    if value is None:
        d.pop(name, None)
    else:
        d[name] = value
    return json.dumps(d, separators=(",", ":"))


RSA_N = base64.urlsafe_b64decode(json.loads(JWK_RSA)["n"] + "==")
EC_X = json.loads(JWK_EC)["x"]
EC_Y = json.loads(JWK_EC)["y"]
OFF_CURVE_Y = EC_Y[:-1] + ("A" if EC_Y[-1] != "A" else "B")
JWKS = {
    "fixed": jwks(JWK_RSA, JWK_EC, JWK_ED, JWK_OCT),
    "empty": '{"keys":[]}',
    "rsa-1024": jwks(with_member(JWK_RSA, "n", b64url(RSA_N[:128]))),
    "rsa-leading-zero": jwks(with_member(JWK_RSA, "n", b64url(b"\x00" + RSA_N))),
    "rsa-even-e": jwks(with_member(JWK_RSA, "e", "AQAA")),
    "ec-off-curve": jwks(with_member(JWK_EC, "y", OFF_CURVE_Y)),
    "ec-short-x": jwks(with_member(JWK_EC, "x", EC_X[:-2])),
    "ec-p384": jwks(with_member(JWK_EC, "crv", "P-384")),
    "private": jwks(with_member(JWK_ED, "d", "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")),
    "use-enc": jwks(with_member(JWK_EC, "use", "enc")),
    "key-ops": jwks(with_member(JWK_EC, "key_ops", ["verify"]), with_member(JWK_ED, "key_ops", [])),
    "alg-mismatch": jwks(with_member(JWK_RSA, "alg", "ES256"), with_member(JWK_EC, "alg", "RS384")),
    "unknown-kty": jwks('{"kty":"XYZ"}', JWK_OCT, "[]", "1", "null"),
    "x25519": jwks(with_member(JWK_ED, "crv", "X25519")),
    "duplicate-kid": jwks(JWK_EC, with_member(JWK_ED, "kid", "ec")),
    "no-kids": jwks(with_member(JWK_EC, "kid", None), with_member(JWK_RSA, "kid", None)),
    "member-twice": jwks(JWK_ED[:-1] + ',"kid":"again"}'),
    "too-many": jwks(*([JWK_OCT] * 65)),
    "no-keys": '{"kes":[]}',
    "keys-object": '{"keys":{}}',
    "not-json": '{"keys":[',
    "deep": '{"keys":' + "[" * 5000,
}


def write(target, seeds):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


def main():
    write("codec_stream", STREAM)
    write("codec_primitives", PRIMITIVES)
    # FuzzedDataProvider reads fields from both ends of its input: seeds of plain random bytes
    # (fixed seed) give it something to start from.
    rng = random.Random(5)
    write("codec_roundtrip",
          {f"random-{i}": bytes(rng.randrange(256) for _ in range(64 << (i % 4)))
           for i in range(8)})
    as_bytes = lambda seeds: {k: v.encode() if isinstance(v, str) else v for k, v in seeds.items()}
    write("jsonrpc", as_bytes(JSONRPC))
    write("http_headers", as_bytes(HTTP))
    write("http_server", as_bytes(HTTP_SERVER))
    write("topics", {k: v.encode("utf-8", "surrogatepass") if isinstance(v, str) else v
                     for k, v in TOPICS.items()})
    write("config", CONFIG)
    write("jwt", JWT)
    write("jwks", as_bytes(JWKS))


if __name__ == "__main__":
    main()
