// A loopback proxy that adds the bearer token to every request before it reaches
// `harness mcp serve --http`: the MCP conformance suite sends none. Everything else (method,
// path, headers, the Host and Origin the suite's DNS-rebinding scenario forges, bodies, SSE
// streams) passes as it is. Prints `PORT <n>` once listening.
//
// Usage: node conformance_proxy.mjs UPSTREAM_PORT   (the token in $MCP_TOKEN)
import http from "node:http";

const upstream = Number(process.argv[2]);
const token = process.env.MCP_TOKEN;

const server = http.createServer((request, response) => {
  const headers = { ...request.headers, authorization: `Bearer ${token}` };
  const forwarded = http.request(
    { host: "127.0.0.1", port: upstream, path: request.url, method: request.method, headers },
    (answer) => {
      response.writeHead(answer.statusCode, answer.headers);
      answer.pipe(response);
    },
  );
  forwarded.on("error", () => response.destroy());
  request.pipe(forwarded);
  response.on("close", () => forwarded.destroy());
});
server.listen(0, "127.0.0.1", () => console.log(`PORT ${server.address().port}`));
