#!/usr/bin/env python3
"""Smart-HTTP Git over TLS for the sources tests.

Serves the repositories under ROOT with `git http-backend` (as CGI) behind
HTTP basic authentication, on 127.0.0.1 and a free port that it writes to
PORT_FILE once it listens.

With a seventh argument REDIRECT (an https:// base URL), it serves nothing
and answers every request with a redirect to REDIRECT + the request's path.

usage: git-https-server.py ROOT CERT KEY PORT_FILE USER TOKEN [REDIRECT]
"""
import base64
import http.server
import os
import ssl
import subprocess
import sys

root, cert, key, port_file, user, token = sys.argv[1:7]
redirect = sys.argv[7] if len(sys.argv) > 7 else None
expected = "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("https-server: " + (fmt % args) + "\n")

    def reply(self, status, headers, body):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            data = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def serve(self):
        body = self.read_body()
        if redirect:
            self.reply(302, [("Location", redirect + self.path)], b"")
            return
        if self.headers.get("Authorization", "") != expected:
            # An empty body: libgit2 1.5 (mbedTLS build) fails to parse the
            # retried response when the 401 on the same connection had one.
            self.reply(401, [("WWW-Authenticate", 'Basic realm="git"')], b"")
            return
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": os.environ.get("HOME", "/"),
            "GIT_PROJECT_ROOT": root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": user,
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        out = subprocess.run(["git", "http-backend"], input=body, env=env,
                             capture_output=True).stdout
        sep = out.find(b"\r\n\r\n")
        head, rest = (out[:sep], out[sep + 4:]) if sep >= 0 else out.split(b"\n\n", 1)
        status, headers = 200, []
        for line in head.replace(b"\r\n", b"\n").split(b"\n"):
            k, _, v = line.decode().partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k:
                headers.append((k, v.strip()))
        self.reply(status, headers, rest)

    do_GET = serve
    do_POST = serve


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
