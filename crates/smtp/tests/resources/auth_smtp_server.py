#!/usr/bin/python3
"""A local SMTP server with AUTH for the smtp crate's outbound tests.

Usage: auth_smtp_server.py PORT INBOX_DIR USER PASSWORD
Listens on 127.0.0.1:PORT, requires AUTH (PLAIN or LOGIN) without TLS, writes each accepted message
byte for byte to INBOX_DIR/<ns>.eml, refuses recipients whose local part is "reject" with 550, prints
"READY" once it accepts connections, and stops on SIGTERM or SIGINT.
"""
import os
import signal
import sys
import time

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


def main():
    port, inbox, user, password = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    users = {user.encode(): password.encode()}

    class Handler:
        async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
            if address.split("@", 1)[0] == "reject":
                return "550 5.1.1 Mailbox refused by the test server"
            envelope.rcpt_tos.append(address)
            return "250 OK"

        async def handle_DATA(self, server, session, envelope):
            path = os.path.join(inbox, f"{time.time_ns()}.eml")
            with open(path + ".tmp", "wb") as f:
                f.write(envelope.original_content or envelope.content)
            with open(path + ".env", "w") as f:
                f.write(envelope.mail_from + "\n" + "\n".join(envelope.rcpt_tos) + "\n")
            # The .eml appears last, complete, so a reader never sees half a message.
            os.rename(path + ".tmp", path)
            return "250 OK stored"

    def authenticate(server, session, envelope, mechanism, data):
        ok = isinstance(data, LoginPassword) and users.get(data.login) == data.password
        return AuthResult(success=ok, handled=False)

    controller = Controller(
        Handler(),
        hostname="127.0.0.1",
        port=port,
        authenticator=authenticate,
        auth_required=True,
        auth_require_tls=False,
        server_hostname="auth-test.local",
    )
    controller.start()
    print("READY", flush=True)
    signal.sigwait({signal.SIGINT, signal.SIGTERM})
    controller.stop()


if __name__ == "__main__":
    main()
