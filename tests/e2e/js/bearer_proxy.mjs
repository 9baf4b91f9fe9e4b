// A loopback proxy that adds `Authorization: Bearer <token>` to every request it forwards,
// for MCP clients that cannot send a header (the conformance runner). Host and Origin go
// through unchanged, and responses (SSE streams too) are piped as they come.
//
// Usage: node bearer_proxy.mjs PORT UPSTREAM_HOST:PORT TOKEN; prints "listening" once it is.
import http from "node:http";

const [listen, upstream, token] = process.argv.slice(2);
const [host, port] = [upstream.slice(0, upstream.lastIndexOf(":")), Number(upstream.slice(upstream.lastIndexOf(":") + 1))];

const server = http.createServer((request, response) => {
  const headers = { ...request.headers, authorization: `Bearer ${token}` };
  const forwarded = http.request(
    { host, port, method: request.method, path: request.url, headers },
    (answer) => {
      response.writeHead(answer.statusCode, answer.headers);
      answer.pipe(response);
    },
  );
  forwarded.on("error", (error) => {
    response.writeHead(502, { "content-type": "text/plain" });
    response.end(`the hub is unreachable: ${error.message}`);
  });
  request.pipe(forwarded);
});
server.listen(Number(listen), "127.0.0.1", () => console.log("listening"));
