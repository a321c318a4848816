"""Drives `wexec mcp` with the official Python MCP SDK (PyPI `mcp` 2.3) and checks every tool
and the denials the operator's grants and the process sandbox impose. Run by
tests/tests/mcp_clients.rs:

    mcp_client.py --mode auto|legacy --root DIR --outside DIR (--url URL [--token T] | -- CMD...)

It exits non-zero with the failed check on stderr; on success it prints one JSON line with
what it saw (the negotiated protocol version, the tools).
"""

import argparse
import asyncio
import http.server
import json
import os
import sys
import threading
import time

import anyio
from mcp import Client, MCPError, StdioServerParameters

EXPECTED_TOOLS = {
    "run_command", "start_process", "read_process_output", "write_process_input",
    "terminate_process", "list_processes", "read_text_file", "read_media_file",
    "read_multiple_files", "write_file", "edit_file", "create_directory", "list_directory",
    "list_directory_with_sizes", "directory_tree", "move_file", "search_files",
    "get_file_info", "list_allowed_directories", "fetch",
}

# One pixel PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def text(result):
    return "".join(block.text for block in result.content if block.type == "text")


async def ok(client, name, arguments, **kwargs):
    result = await client.call_tool(name, arguments, **kwargs)
    check(not result.is_error, f"{name} {arguments}: unexpected error: {text(result)}")
    return result


async def refused(client, name, arguments, *words):
    result = await client.call_tool(name, arguments)
    check(result.is_error, f"{name} {arguments}: expected a tool error, got {text(result)}")
    for word in words:
        check(word in text(result), f"{name}: `{word}` not in the error `{text(result)}`")
    return text(result)


def serve_http():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"fetched " + self.path.encode()
            self.send_response(200)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def alive_with(marker):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    return True
        except OSError:
            pass
    return False


async def files(client, root, outside):
    await ok(client, "write_file", {"path": f"{root}/notes.txt", "content": "one\ntwo\nthree\n"})
    result = await ok(client, "read_text_file", {"path": "notes.txt"})
    check(text(result) == "one\ntwo\nthree\n", f"read_text_file: {text(result)!r}")
    check(result.structured_content == {"content": "one\ntwo\nthree\n"}, "structured content")
    check(text(await ok(client, "read_text_file", {"path": "notes.txt", "head": 1})) == "one\n", "head")
    check(text(await ok(client, "read_text_file", {"path": "notes.txt", "tail": 2})) == "two\nthree\n", "tail")
    diff = text(await ok(client, "edit_file", {"path": "notes.txt", "edits": [{"oldText": "two", "newText": "2"}], "dryRun": True}))
    check("-two" in diff and "+2" in diff, f"dry-run diff: {diff}")
    check(text(await ok(client, "read_text_file", {"path": "notes.txt"})).count("two") == 1, "dry run wrote")
    await ok(client, "edit_file", {"path": "notes.txt", "edits": [{"oldText": "two", "newText": "2"}]})
    check("2\n" in text(await ok(client, "read_text_file", {"path": "notes.txt"})), "edit not written")
    await ok(client, "create_directory", {"path": "sub/deeper"})
    await ok(client, "write_file", {"path": "sub/deeper/x.rs", "content": "fn main() {}\n"})
    listing = text(await ok(client, "list_directory", {"path": root}))
    check("[FILE] notes.txt" in listing and "[DIR] sub" in listing, f"list_directory: {listing}")
    sizes = text(await ok(client, "list_directory_with_sizes", {"path": ".", "sortBy": "size"}))
    check("Combined size" in sizes, f"list_directory_with_sizes: {sizes}")
    tree = json.loads(text(await ok(client, "directory_tree", {"path": "."})))
    sub = next(entry for entry in tree if entry["name"] == "sub")
    check(sub["children"][0]["children"][0]["name"] == "x.rs", f"directory_tree: {tree}")
    found = text(await ok(client, "search_files", {"path": ".", "pattern": "*.rs"}))
    check(found.strip() == f"{root}/sub/deeper/x.rs", f"search_files: {found}")
    info = text(await ok(client, "get_file_info", {"path": "notes.txt"}))
    check("isFile: true" in info, f"get_file_info: {info}")
    await ok(client, "move_file", {"source": "notes.txt", "destination": "moved.txt"})
    check(not os.path.exists(f"{root}/notes.txt") and os.path.exists(f"{root}/moved.txt"), "move_file")
    many = text(await ok(client, "read_multiple_files", {"paths": ["moved.txt", "missing.txt"]}))
    check("moved.txt:\none" in many and "missing.txt: Error" in many, f"read_multiple_files: {many}")
    with open(f"{root}/pixel.png", "wb") as f:
        f.write(PNG)
    media = await ok(client, "read_media_file", {"path": "pixel.png"})
    check(media.content[0].type == "image" and media.content[0].mime_type == "image/png", "read_media_file")
    allowed = text(await ok(client, "list_allowed_directories", {}))
    check(root in allowed, f"list_allowed_directories: {allowed}")
    # Denials: the grants.
    await refused(client, "read_text_file", {"path": f"{outside}/secret.txt"}, "outside")
    await refused(client, "write_file", {"path": f"{outside}/new.txt", "content": "x"}, "outside")
    check(not os.path.exists(f"{outside}/new.txt"), "a write outside the roots happened")
    await refused(client, "read_text_file", {"path": "notes.txt", "head": "x"}, "`head`", "integer")
    await refused(client, "write_file", {"path": "x"}, "missing required argument `content`")
    await refused(client, "edit_file", {"path": "moved.txt", "edits": [{"oldText": "nope", "newText": ""}]}, "not found")


async def processes(client, root, outside):
    run = await ok(client, "run_command", {"command": "echo hi; echo err >&2; exit 3"})
    out = run.structured_content
    check((out["exit_code"], out["stdout"], out["stderr"]) == (3, "hi\n", "err\n"), f"run_command: {out}")
    check(json.loads(text(run)) == out, "the text block is the structured content")
    piped = await ok(client, "run_command", {"argv": ["wc", "-l"], "stdin": "a\nb\nc\n"})
    check(piped.structured_content["stdout"].strip() == "3", f"stdin: {piped.structured_content}")
    env = await ok(client, "run_command", {"command": "echo $GREETING; pwd", "env": {"GREETING": "hello"}, "cwd": "sub"})
    check(env.structured_content["stdout"] == f"hello\n{root}/sub\n", f"env/cwd: {env.structured_content}")
    big = await ok(client, "run_command", {"command": "head -c 100000 /dev/zero | tr '\\0' a", "max_output_bytes": 1000})
    check(big.structured_content["stdout_truncated"] and len(big.structured_content["stdout"]) < 1100, "truncation")
    slow = await ok(client, "run_command", {"command": "sleep 30", "timeout_ms": 300})
    check(slow.structured_content["timed_out"], f"timeout: {slow.structured_content}")
    # Progress while a command runs.
    seen = []

    async def progress(value, total, message):
        seen.append(value)

    await ok(client, "run_command", {"command": "for i in 1 2 3 4; do echo $i; sleep 0.15; done"}, progress_callback=progress)
    check(len(seen) >= 2, f"progress notifications: {seen}")
    # The sandbox: a write outside the writable roots is refused by the kernel.
    denied = await ok(client, "run_command", {"command": f"echo x > {outside}/by-process.txt"})
    check(denied.structured_content["exit_code"] != 0, f"sandboxed write: {denied.structured_content}")
    check(not os.path.exists(f"{outside}/by-process.txt"), "a process wrote outside the writable roots")
    # A long-running process.
    started = await ok(client, "start_process", {"argv": ["cat"]})
    pid = started.structured_content["process_id"]
    await ok(client, "write_process_input", {"process_id": pid, "input": "ping\n"})
    read = await ok(client, "read_process_output", {"process_id": pid, "wait_ms": 5000})
    check(read.structured_content["stdout"] == "ping\n", f"read_process_output: {read.structured_content}")
    listed = (await ok(client, "list_processes", {})).structured_content["processes"]
    check(any(p["process_id"] == pid and not p["exited"] for p in listed), f"list_processes: {listed}")
    await ok(client, "write_process_input", {"process_id": pid, "input": "", "close_stdin": True})
    after = read.structured_content["next_seq"] - 1
    done = await ok(client, "read_process_output", {"process_id": pid, "after_seq": after, "wait_ms": 5000})
    check(done.structured_content["exited"] and done.structured_content["exit_code"] == 0, f"cat after EOF: {done.structured_content}")
    sleeper = await ok(client, "start_process", {"command": "sleep 60"})
    await ok(client, "terminate_process", {"process_id": sleeper.structured_content["process_id"]})
    await refused(client, "read_process_output", {"process_id": "nope"}, "nope")
    await refused(client, "run_command", {"command": "x", "argv": ["y"]}, "not both")
    # Cancelling a command ends it and everything it forked.
    marker = f"{time.time_ns() % 1000000}.{os.getpid()}"
    with anyio.move_on_after(1.5):
        await client.call_tool("run_command", {"command": f"sh -c 'sleep {marker}' & sleep {marker}; wait"})
    deadline = time.time() + 10
    while alive_with(marker) and time.time() < deadline:
        await asyncio.sleep(0.1)
    check(not alive_with(marker), "a cancelled command's processes outlived it")


async def resources(client, root, outside):
    listed = await client.list_resources()
    uris = {resource.uri for resource in listed.resources}
    check(f"file://{root}/moved.txt" in uris, f"resources/list: {sorted(uris)}")
    read = await client.read_resource(f"file://{root}/moved.txt")
    check(read.contents[0].text.startswith("one\n"), f"resources/read: {read.contents}")
    templates = await client.list_resource_templates()
    check(templates.resource_templates[0].uri_template == "file://{+path}", f"templates: {templates}")
    try:
        await client.read_resource(f"file://{outside}/secret.txt")
        check(False, "a resource outside the roots was read")
    except MCPError as error:
        check("outside" in error.error.message, f"resources/read outside: {error.error}")


async def fetch(client):
    port = serve_http()
    got = await ok(client, "fetch", {"url": f"http://127.0.0.1:{port}/page"})
    check(got.structured_content["status"] == 200 and got.structured_content["body"] == "fetched /page", f"fetch: {got.structured_content}")
    await refused(client, "fetch", {"url": "http://203.0.113.7/"}, "203.0.113.7")


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="auto")
    parser.add_argument("--root", required=True)
    parser.add_argument("--outside", required=True)
    parser.add_argument("--url")
    parser.add_argument("--token")
    parser.add_argument("command", nargs="*")
    args = parser.parse_args()
    if args.url:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
        target = streamable_http_client(args.url, http_client=httpx2.AsyncClient(headers=headers, timeout=60))
    else:
        target = StdioServerParameters(command=args.command[0], args=args.command[1:])
    async with Client(target, mode=args.mode, read_timeout_seconds=60) as client:
        version = client.protocol_version
        names = {tool.name for tool in (await client.list_tools()).tools}
        check(names == EXPECTED_TOOLS, f"tools: {sorted(names ^ EXPECTED_TOOLS)} differ")
        try:
            await client.call_tool("no_such_tool", {})
            check(False, "an unknown tool was called")
        except MCPError as error:
            check(error.error.code == -32602, f"unknown tool: {error.error}")
        await files(client, args.root, args.outside)
        await resources(client, args.root, args.outside)
        await processes(client, args.root, args.outside)
        await fetch(client)
    print(json.dumps({"protocol_version": version, "tools": sorted(names)}))


def first_failure(error):
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


if __name__ == "__main__":
    try:
        anyio.run(main)
    except BaseException as error:  # noqa: BLE001 - the failure is reported, then re-raised
        failed = first_failure(error)
        if isinstance(failed, AssertionError):
            print(f"check failed: {failed}", file=sys.stderr)
            sys.exit(1)
        raise
