import net from "node:net";
import tls from "node:tls";

export interface Received {
  from: string;
  to: string[];
  data: string;
}

/**
 * A tiny SMTP server speaking just enough of RFC 5321 for nodemailer; `rejectRcpt` makes it refuse
 * recipients, `dropAfterData` take the message and drop the connection before answering it (a relay
 * that queued it, then timed out or crashed: the sender cannot tell whether it went), `silent` accept
 * connections and never greet (a relay that hangs: the sender gives up before any message),
 * `answerDataWhen` take the message and answer it only once that promise settles (a slow relay),
 * `refuseData` answer the message with a refusal instead of accepting it (with `answerDataWhen`: a
 * slow relay that then refuses). `tls`: implicit TLS (smtps, port 465 style) with a self-signed
 * certificate no client trusts, so every handshake fails the certificate check (unless the client
 * is told not to check it). `corruptAfterData` (with `tls`): take the message, then answer with bytes
 * that are no TLS record (a relay or a middlebox garbling the line after the message was handed over).
 */
export async function startSmtp(options: { rejectRcpt?: boolean; dropAfterData?: boolean; silent?: boolean; answerDataWhen?: Promise<unknown>; refuseData?: boolean; tls?: boolean; corruptAfterData?: boolean } = {}) {
  const dataAnswer = options.refuseData ? "554 5.7.1 message refused\r\n" : "250 2.0.0 queued\r\n";
  const messages: Received[] = [];
  const sockets = new Set<net.Socket>();
  const serve = (socket: net.Socket, raw: net.Socket = socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.setEncoding("utf8");
    if (options.silent) return;
    socket.write("220 smtp.test ESMTP ready\r\n");
    let buffer = "";
    let inData = false;
    let current: Received = { from: "", to: [], data: "" };
    socket.on("data", (chunk: string) => {
      buffer += chunk;
      for (;;) {
        if (inData) {
          const end = buffer.indexOf("\r\n.\r\n");
          if (end < 0) return;
          current.data = buffer.slice(0, end);
          buffer = buffer.slice(end + 5);
          inData = false;
          messages.push(current);
          current = { from: "", to: [], data: "" };
          if (options.corruptAfterData) {
            raw.write("this is no TLS record\r\n");
            return;
          }
          if (options.dropAfterData) {
            socket.destroy();
            return;
          }
          if (options.answerDataWhen) {
            void options.answerDataWhen.finally(() => !socket.destroyed && socket.write(dataAnswer));
            continue;
          }
          socket.write(dataAnswer);
          continue;
        }
        const eol = buffer.indexOf("\r\n");
        if (eol < 0) return;
        const line = buffer.slice(0, eol);
        buffer = buffer.slice(eol + 2);
        const verb = line.split(" ")[0]!.toUpperCase();
        if (verb === "EHLO" || verb === "HELO") socket.write("250-smtp.test\r\n250 8BITMIME\r\n");
        else if (verb === "MAIL") {
          current.from = line;
          socket.write("250 2.1.0 ok\r\n");
        } else if (verb === "RCPT") {
          if (options.rejectRcpt) socket.write("550 5.1.1 no such user\r\n");
          else {
            current.to.push(line);
            socket.write("250 2.1.5 ok\r\n");
          }
        } else if (verb === "DATA") {
          inData = true;
          socket.write("354 end with <CRLF>.<CRLF>\r\n");
        } else if (verb === "QUIT") socket.end("221 2.0.0 bye\r\n");
        else if (verb === "RSET" || verb === "NOOP") socket.write("250 2.0.0 ok\r\n");
        else socket.write("502 5.5.2 not implemented\r\n");
      }
    });
  };
  const secureContext = tls.createSecureContext({ key: SELF_SIGNED_KEY, cert: SELF_SIGNED_CERT });
  // TLS over a socket of its own, so corruptAfterData can write past the TLS layer.
  const server = options.tls
    ? net.createServer((raw) => {
        sockets.add(raw);
        raw.on("close", () => sockets.delete(raw));
        const secure = new tls.TLSSocket(raw, { isServer: true, secureContext });
        secure.on("error", () => raw.destroy());
        serve(secure, raw);
      })
    : net.createServer((socket) => serve(socket));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `${options.tls ? "smtps" : "smtp"}://127.0.0.1:${port}`,
    messages,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A self-signed certificate for smtp.test (valid for a century): no client's trust store holds it. */
const SELF_SIGNED_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQghs965DnRheuv6ypY
9QY+1bnCCwPsPJcZYQomVKY0G4ShRANCAAQFXNHq6yhTghizCmT+J4u5N+WHsrXY
trxCxbKsbxCunDOVLmsvjr+2XsyQbRHXzPf6AXZxIRjQh37xLVTFF0jx
-----END PRIVATE KEY-----
`;
const SELF_SIGNED_CERT = `-----BEGIN CERTIFICATE-----
MIIBfzCCASWgAwIBAgIURkWY160/MYBFiuceMuq6FukEgHMwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJc210cC50ZXN0MCAXDTI2MTEyODE3MjczMFoYDzIxMjYxMTA0
MTcyNzMwWjAUMRIwEAYDVQQDDAlzbXRwLnRlc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAQFXNHq6yhTghizCmT+J4u5N+WHsrXYtrxCxbKsbxCunDOVLmsvjr+2
XsyQbRHXzPf6AXZxIRjQh37xLVTFF0jxo1MwUTAdBgNVHQ4EFgQU0k6oW9V/O0gA
WGlMcuhsKtbPEVEwHwYDVR0jBBgwFoAU0k6oW9V/O0gAWGlMcuhsKtbPEVEwDwYD
VR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiA7/CUh8D73prA+OvMWgSz7
VfUETKR4/2L6qPVLXFyxqwIhANbSuYSY6GRitjKC6dAbvxmtPvYMq8r4NtcnX/9M
i5tH
-----END CERTIFICATE-----
`;
