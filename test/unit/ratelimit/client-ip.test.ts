import t from 'tap'
import { createClientIpResolver } from '../../../src/ratelimit/client-ip.js'

t.test('without trusted proxies the socket address is the client', async (t) => {
  const resolve = createClientIpResolver([])
  t.equal(resolve('203.0.113.9', '1.2.3.4'), '203.0.113.9', 'X-Forwarded-For ignored')
  t.equal(resolve('::ffff:127.0.0.1', undefined), '127.0.0.1', 'IPv4-mapped IPv6 counts as IPv4')
  t.equal(resolve('2001:db8:0:0:0:0:0:1', undefined), '2001:db8::1', 'one spelling per IPv6 address')
  t.equal(resolve(undefined, '1.2.3.4'), 'unknown')
})

t.test('X-Forwarded-For is honoured only from trusted peers', async (t) => {
  const resolve = createClientIpResolver(['10.0.0.0/8', '192.0.2.1', '::1'])
  t.equal(resolve('198.51.100.7', '1.2.3.4'), '198.51.100.7', 'spoofed header from an untrusted peer changes nothing')
  t.equal(resolve('10.1.2.3', '1.2.3.4'), '1.2.3.4')
  t.equal(resolve('::ffff:10.1.2.3', '1.2.3.4'), '1.2.3.4', 'trusted peer seen through a dual-stack socket')
  t.equal(resolve('::1', '2001:db8::5'), '2001:db8::5')
  t.equal(resolve('10.1.2.3', undefined), '10.1.2.3', 'no header: the proxy itself')
})

t.test('the right-most untrusted hop is the client', async (t) => {
  const resolve = createClientIpResolver(['10.0.0.0/8', '192.0.2.1'])
  t.equal(resolve('10.0.0.1', '6.6.6.6, 1.2.3.4'), '1.2.3.4', 'hops the client wrote itself are ignored')
  t.equal(resolve('10.0.0.1', '6.6.6.6, 1.2.3.4, 192.0.2.1, 10.9.9.9'), '1.2.3.4', 'chain of trusted proxies')
  t.equal(resolve('10.0.0.1', '10.0.0.5, 10.0.0.6'), '10.0.0.5', 'all hops trusted: the left-most')
  t.equal(resolve('10.0.0.1', '1.2.3.4:5678'), '1.2.3.4', 'port stripped')
  t.equal(resolve('10.0.0.1', '[2001:db8::7]:443'), '2001:db8::7', 'bracketed IPv6 with port')
  t.equal(resolve('10.0.0.1', '1.2.3.4, garbage'), '10.0.0.1', 'a malformed hop: the last trusted hop stands in')
  t.equal(resolve('10.0.0.1', '127.1'), '10.0.0.1', 'shorthand IPv4 forms are not addresses')
})

t.test('IPv4-mapped trusted range and bad entries', async (t) => {
  const resolve = createClientIpResolver(['::ffff:10.0.0.0/104'])
  t.equal(resolve('10.200.0.1', '1.2.3.4'), '1.2.3.4')
  t.throws(() => createClientIpResolver(['10.0.0.0/33']), /SVC_TRUSTED_PROXIES: "10.0.0.0\/33"/)
  t.throws(() => createClientIpResolver(['proxy.local']), /SVC_TRUSTED_PROXIES/)
})

t.test('IPv6 clients are counted per network of the configured prefix length', async (t) => {
  const per64 = createClientIpResolver(['10.0.0.0/8'], 64)
  t.equal(per64('2001:db8:1:2:aaaa::1', undefined), '2001:db8:1:2::/64')
  t.equal(per64('2001:db8:1:2:ffff:ffff:ffff:ffff', undefined), '2001:db8:1:2::/64', 'the same /64, the same bucket')
  t.equal(per64('2001:db8:1:3::1', undefined), '2001:db8:1:3::/64', 'the next /64 is another client')
  t.equal(per64('10.0.0.1', '2001:db8:1:2::99'), '2001:db8:1:2::/64', 'behind a trusted proxy too')
  t.equal(per64('203.0.113.9', undefined), '203.0.113.9', 'IPv4 unchanged')
  t.equal(per64('::ffff:203.0.113.9', undefined), '203.0.113.9', 'IPv4-mapped counts as IPv4')
  t.equal(createClientIpResolver([], 48)('2001:db8:1:2::1', undefined), '2001:db8:1::/48')
  t.equal(createClientIpResolver([], 128)('2001:db8:1:2::1', undefined), '2001:db8:1:2::1', '128: single addresses')
})

t.test('socket addresses are remembered per resolver, and answers stay right past the bound', async (t) => {
  const resolve = createClientIpResolver(['10.0.0.0/8'], 64)
  const first = ['10.1.2.3', '2001:db8:1:2::9', '198.51.100.7', 'not-an-address']
  const expected = (peer: string) => [resolve(peer, '1.2.3.4'), resolve(peer, undefined)]
  const before = first.map(expected)
  t.same(before, [['1.2.3.4', '10.1.2.3'], ['2001:db8:1:2::/64', '2001:db8:1:2::/64'], ['198.51.100.7', '198.51.100.7'], ['not-an-address', 'not-an-address']])
  // More distinct peers than the resolver keeps: it starts over, the answers do not change.
  const wrong: string[] = []
  for (let i = 0; i < 10_050; i++) {
    const peer = `172.16.${i >> 8}.${i & 255}`
    if (resolve(peer, '1.2.3.4') !== peer) wrong.push(peer)
  }
  t.same(wrong, [], 'every untrusted peer is its own client')
  t.same(first.map(expected), before, 'the same answers after the bound was passed')
  t.equal(createClientIpResolver([])('10.1.2.3', '1.2.3.4'), '10.1.2.3', 'another resolver has its own trust, not this one')
})
