/**
 * The proxy benchmarks' destination (a child process on the driver core): reads the request
 * body and answers 200 with a small JSON body. Prints `{"port":N}` once listening.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'

const answer = Buffer.from(JSON.stringify({ ok: true, id: 'ch_3PqzLk2eZvKYlo2C0Xn4', status: 'succeeded' }))

const server = http.createServer((req, res) => {
  let bytes = 0
  req.on('data', (chunk: Buffer) => {
    bytes += chunk.length
  })
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length, 'x-received-bytes': String(bytes) })
    res.end(answer)
  })
})
// Longer than any client's idle time, so pooled connections are never closed under a request.
server.keepAliveTimeout = 65_000
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: (server.address() as AddressInfo).port }) + '\n')
})
process.on('SIGTERM', () => process.exit(0))
