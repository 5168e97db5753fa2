"""Receivers for platter's alerts, started by coordinator/tests/alerts.rs (Debian's
python3 with python3-aiosmtpd, as .ci/run installs them).

  alerts.py webhook PORT OUT KEYFILE [DELAY_S]
      An HTTP server on 127.0.0.1:PORT. Each POST is checked as a receiver would check
      it: X-Platter-Signature must be v1=HEX(HMAC-SHA256(key, TIMESTAMP + "." + BODY))
      with the key read from KEYFILE, and the timestamp within 5 minutes. It is appended
      to OUT as one JSON line (its key, whether the signature held, the body) and
      answered 200 after DELAY_S seconds.

  alerts.py smtp PORT OUT CERT KEY
      An SMTP server on 127.0.0.1:PORT that requires STARTTLS (CERT/KEY), appending each
      mail to OUT as one JSON line (envelope, Message-ID, Subject, body).

Both write OUT.ready once they listen.
"""
import hashlib
import hmac
import json
import sys
import time


def record(out, entry):
    with open(out, "a") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()


def webhook(port, out, keyfile, delay=0.0):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            key = open(keyfile, "rb").read().strip()
            ts = self.headers.get("X-Platter-Timestamp", "")
            want = "v1=" + hmac.new(key, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
            got = self.headers.get("X-Platter-Signature", "")
            fresh = ts.isdigit() and abs(time.time() - int(ts)) < 300
            record(out, {
                "path": self.path,
                "key": self.headers.get("Idempotency-Key", ""),
                "signature_ok": hmac.compare_digest(want, got) and fresh,
                "received_unix_ms": int(time.time() * 1000),
                "body": json.loads(body),
            })
            time.sleep(delay)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    open(out + ".ready", "w").close()
    server.serve_forever()


def smtp(port, out, cert, key):
    import ssl
    from aiosmtpd.controller import Controller

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            from email import message_from_bytes
            m = message_from_bytes(envelope.content)
            record(out, {
                "from": envelope.mail_from,
                "to": envelope.rcpt_tos,
                "tls": session.ssl is not None,
                "message_id": m.get("Message-ID", ""),
                "subject": m.get("Subject", ""),
                "body": m.get_payload(decode=True).decode(),
            })
            return "250 OK"

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    c = Controller(Handler(), hostname="127.0.0.1", port=port, tls_context=ctx,
                   require_starttls=True, auth_require_tls=True)
    c.start()
    open(out + ".ready", "w").close()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    mode, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "webhook":
        webhook(port, out, sys.argv[4], float(sys.argv[5]) if len(sys.argv) > 5 else 0.0)
    else:
        smtp(port, out, sys.argv[4], sys.argv[5])
