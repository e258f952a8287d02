#!/usr/bin/python3
"""A caller's SMTP server for the `smtp` spam method tests: requires AUTH, then relays.

Usage: relay_smtp_server.py PORT RELAY_PORT USER PASSWORD
Listens on 127.0.0.1:PORT, requires AUTH (PLAIN or LOGIN) without TLS, and hands every accepted
message unchanged to 127.0.0.1:RELAY_PORT (mailproof's SMTP listener) before answering 250, as a
real provider's server would deliver it to the seed addresses. Prints "READY" once it accepts
connections and stops on SIGTERM or SIGINT.
"""
import signal
import smtplib
import sys

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


def main():
    port, relay_port, user, password = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    users = {user.encode(): password.encode()}

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            data = envelope.original_content or envelope.content
            try:
                with smtplib.SMTP("127.0.0.1", relay_port, local_hostname="relay.example.net", timeout=60) as out:
                    out.sendmail(envelope.mail_from, envelope.rcpt_tos, data)
            except (smtplib.SMTPException, OSError) as e:
                return f"451 4.4.1 Relay to 127.0.0.1:{relay_port} failed: {e}"
            return "250 OK relayed"

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
        server_hostname="relay.example.net",
    )
    controller.start()
    print("READY", flush=True)
    signal.sigwait({signal.SIGINT, signal.SIGTERM})
    controller.stop()


if __name__ == "__main__":
    main()
