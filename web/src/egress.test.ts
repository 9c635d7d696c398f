// The allow-list's logic: the form's rows read as rules (or refused in
// words), which hosts a rule covers, and what "Allow this host" sends.
import { describe, expect, it } from 'vitest'
import { allowingHost, hostMatches, isHostAllowed, rowOf, rulesOf, type RuleRow } from './egress'
import { agentAt, agentWithEgress } from './testkit'

const row = (r: Partial<RuleRow>): RuleRow => ({ host: '', ports: '', methods: '', paths: '', ...r })

describe('rulesOf', () => {
  it('reads each list, leaves blank rows out, and sends only what was given', () => {
    expect(
      rulesOf([
        row({ host: ' a.example.com ', ports: '443,8443', methods: 'get, Head', paths: '/v2/ /simple/' }),
        row({}),
        row({ host: '*.example.org' }),
      ]),
    ).toEqual([{ host: 'a.example.com', ports: [443, 8443], methods: ['GET', 'HEAD'], paths: ['/v2/', '/simple/'] }, { host: '*.example.org' }])
  })

  const refusals: [string, Partial<RuleRow>, string][] = [
    ['no host', { ports: '443' }, 'Allowed host 1: enter the host name.'],
    ['a URL', { host: 'https://a.example.com/' }, 'Allowed host 1: a host name only, such as registry.example.com or *.example.com (no scheme, port or path).'],
    ['a port in the host', { host: 'a.example.com:8443' }, 'Allowed host 1: a host name only, such as registry.example.com or *.example.com (no scheme, port or path).'],
    ['port 0', { host: 'a', ports: '0' }, 'Allowed host 1: ports are whole numbers from 1 to 65535, such as 443, 8443.'],
    ['port 70000', { host: 'a', ports: '70000' }, 'Allowed host 1: ports are whole numbers from 1 to 65535, such as 443, 8443.'],
    ['a method that is not a word', { host: 'a', methods: 'G3T' }, 'Allowed host 1: methods are words such as GET, HEAD.'],
    ['a path without its slash', { host: 'a', paths: 'v2/' }, 'Allowed host 1: each path prefix starts with /, such as /simple/.'],
  ]
  for (const [name, r, words] of refusals) {
    it(`refuses ${name}`, () => expect(() => rulesOf([row(r)])).toThrow(words))
  }

  it('gives back the rows it was made from', () => {
    const rule = { host: 'a.example.com', ports: [443], methods: ['GET'], paths: ['/x/'] }
    expect(rulesOf([rowOf(rule)])).toEqual([rule])
  })
})

describe('hostMatches', () => {
  const cases: [string, string, boolean][] = [
    ['registry.npmjs.org', 'Registry.NPMjs.org', true],
    ['registry.npmjs.org', 'npmjs.org', false],
    ['*.example.com', 'a.example.com', true],
    ['*.example.com', 'a.b.example.com', true],
    ['*.example.com', 'example.com', false],
    ['*.example.com', 'badexample.com', false],
  ]
  for (const [pattern, host, want] of cases) it(`${pattern} ${want ? 'matches' : 'does not match'} ${host}`, () => expect(hostMatches(pattern, host)).toBe(want))
})

describe('Allow this host', () => {
  const egress = { allow: [{ host: 'keep.example.com', methods: ['GET'] }], presets: ['npm'] }

  it('adds {host} and turns the allow-list on, keeping the rest', () => {
    expect(allowingHost(agentWithEgress('editor', 'none', egress), 'registry.example.com', 443)).toEqual({
      network: 'allowlist',
      egress: { allow: [...egress.allow, { host: 'registry.example.com' }], presets: ['npm'] },
    })
  })

  it('names a port that a rule does not allow by default', () => {
    expect(allowingHost(agentWithEgress('editor', 'allowlist', egress), 'git.example.com', 2222).egress.allow).toContainEqual({ host: 'git.example.com', ports: [2222] })
  })

  it('adds nothing for a host a rule covers, only turning the allow-list on', () => {
    const on = { allow: [{ host: '*.example.com' }], presets: [] }
    expect(allowingHost(agentWithEgress('editor', 'none', on), 'a.example.com', 443)).toEqual({ network: 'allowlist', egress: on })
  })

  it('works from an agent of a server without egress', () => {
    expect(allowingHost(agentAt('editor'), 'a.example.com')).toEqual({ network: 'allowlist', egress: { allow: [{ host: 'a.example.com' }], presets: [] } })
  })

  const allowed: [string, boolean][] = [
    ['registry.example.com', true],
    ['other.example.com', false],
    ['keep.example.com', false], // its rule only lets GET through
  ]
  for (const [host, want] of allowed) {
    it(`${host} is ${want ? '' : 'not '}allowed already`, () => {
      const a = agentWithEgress('editor', 'allowlist', { allow: [...egress.allow, { host: 'registry.example.com' }], presets: [] })
      expect(isHostAllowed(a, host, 443)).toBe(want)
    })
  }

  it('is not allowed while the network is none', () => {
    expect(isHostAllowed(agentWithEgress('editor', 'none', { allow: [{ host: 'a.example.com' }], presets: [] }), 'a.example.com')).toBe(false)
  })
})
