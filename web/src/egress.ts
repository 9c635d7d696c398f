// An agent's network: none, or an allow-list of hosts its runs reach
// through Corral's egress proxy (presets for the well-known registries, and
// hosts of its own), and the secrets that proxy adds as a header to the
// requests for one host.
//
// The shapes are the server's (types.ts, generated from its OpenAPI
// document); this module holds what the app does with them.

import type { Agent, AgentRequest, Schemas, TraceType } from './types'

/** A run's network access: `none`, or only the hosts of the agent's egress allow-list. */
export type NetworkMode = Agent['policy']['network']
type EgressRequest = NonNullable<NonNullable<AgentRequest['policy']>['egress']>
/** One allowed host as the app edits it: what the server answers, with ports, methods and paths optional. */
export type EgressRule = NonNullable<EgressRequest['allow']>[number]
/** The allow-list as the app edits it and sends it whole. */
export interface Egress {
  allow: EgressRule[]
  presets: string[]
}
export type EgressPreset = Schemas['EgressPreset']
export type AgentSecret = Schemas['Secret']
export type SecretRequest = Schemas['SecretRequest']
export type AgentRequestWithEgress = AgentRequest
export type TraceTypeWithEgress = TraceType

/** A rule without its empty lists: what the server answers, as compact as it was set. */
function compact(r: EgressRule): EgressRule {
  const out: EgressRule = { host: r.host }
  if (r.ports?.length) out.ports = r.ports
  if (r.methods?.length) out.methods = r.methods
  if (r.paths?.length) out.paths = r.paths
  return out
}

/** An agent's network and allow-list; an agent from a server without them has none. */
export function egressOf(agent: Agent): { network: NetworkMode; egress: Egress } {
  const p = agent.policy
  return {
    network: p.network === 'allowlist' ? 'allowlist' : 'none',
    egress: { allow: (p.egress?.allow ?? []).map(compact), presets: p.egress?.presets ?? [] },
  }
}

/** Whether a rule's host (maybe `*.suffix`) names host. */
export function hostMatches(pattern: string, host: string): boolean {
  const p = pattern.trim().toLowerCase()
  const h = host.trim().toLowerCase()
  if (p.startsWith('*.')) return h.endsWith(p.slice(1)) && h.length > p.length - 1
  return p === h
}

/** The ports a rule allows: its own, or 80 and 443. */
export function rulePorts(r: EgressRule): number[] {
  return r.ports && r.ports.length > 0 ? r.ports : [80, 443]
}

/** A rule of the list lets any request to host (on port, when known) through. */
function ruleCovers(allow: EgressRule[], host: string, port?: number): boolean {
  return allow.some(
    (r) =>
      hostMatches(r.host, host) &&
      !r.methods?.length &&
      !r.paths?.length &&
      (port === undefined || rulePorts(r).includes(port)),
  )
}

/**
 * Whether the agent's runs may already reach host (on port, when known):
 * the network is the allow-list and a rule of its own lets every request
 * through. (A preset's hosts are not counted: they are not on the agent.)
 */
export function isHostAllowed(agent: Agent, host: string, port?: number): boolean {
  const { network, egress } = egressOf(agent)
  return network === 'allowlist' && ruleCovers(egress.allow, host, port)
}

/**
 * The policy change that lets host through, the rest of the allow-list
 * kept: the network becomes the allow-list and `{host}` is added (with the
 * port, when it is not one a rule allows by default) unless a rule already
 * covers it.
 */
export function allowingHost(agent: Agent, host: string, port?: number): { network: NetworkMode; egress: Egress } {
  const { egress } = egressOf(agent)
  if (ruleCovers(egress.allow, host, port)) return { network: 'allowlist', egress }
  const rule: EgressRule = port === undefined || port === 80 || port === 443 ? { host } : { host, ports: [port] }
  return { network: 'allowlist', egress: { allow: [...egress.allow, rule], presets: egress.presets } }
}

/** An allow-list rule as the form edits it: each list as typed, comma-separated. */
export interface RuleRow {
  host: string
  ports: string
  methods: string
  paths: string
}

export const emptyRow: RuleRow = { host: '', ports: '', methods: '', paths: '' }

export function rowOf(r: EgressRule): RuleRow {
  return { host: r.host, ports: (r.ports ?? []).join(', '), methods: (r.methods ?? []).join(', '), paths: (r.paths ?? []).join(', ') }
}

function items(s: string): string[] {
  return s
    .split(/[\s,]+/)
    .map((x) => x.trim())
    .filter((x) => x !== '')
}

/**
 * The rules of the form's rows, blank rows left out; throws an Error in
 * words (naming the row) for a value that cannot be one. The server checks
 * them again.
 */
export function rulesOf(rows: RuleRow[]): EgressRule[] {
  const out: EgressRule[] = []
  rows.forEach((row, i) => {
    const where = `Allowed host ${i + 1}`
    const host = row.host.trim()
    if (host === '' && row.ports.trim() === '' && row.methods.trim() === '' && row.paths.trim() === '') return
    if (host === '') throw new Error(`${where}: enter the host name.`)
    if (/[\s/:@]/.test(host)) {
      throw new Error(`${where}: a host name only, such as registry.example.com or *.example.com (no scheme, port or path).`)
    }
    const rule: EgressRule = { host }
    const ports = items(row.ports).map((p) => {
      const n = /^\d+$/.test(p) ? Number(p) : NaN
      if (!(n >= 1 && n <= 65535)) throw new Error(`${where}: ports are whole numbers from 1 to 65535, such as 443, 8443.`)
      return n
    })
    if (ports.length > 0) rule.ports = ports
    const methods = items(row.methods).map((m) => {
      if (!/^[A-Za-z]+$/.test(m)) throw new Error(`${where}: methods are words such as GET, HEAD.`)
      return m.toUpperCase()
    })
    if (methods.length > 0) rule.methods = methods
    const paths = items(row.paths)
    for (const p of paths) if (!p.startsWith('/')) throw new Error(`${where}: each path prefix starts with /, such as /simple/.`)
    if (paths.length > 0) rule.paths = paths
    out.push(rule)
  })
  return out
}

/** A rule in one line: "registry.example.com · ports 443, 8443 · GET, HEAD · under /v2/". */
export function ruleWords(r: EgressRule): string {
  const parts = [r.host]
  parts.push(r.ports?.length ? `port${r.ports.length > 1 ? 's' : ''} ${r.ports.join(', ')}` : 'ports 80 and 443')
  parts.push(r.methods?.length ? r.methods.join(', ') : 'any method')
  if (r.paths?.length) parts.push(`under ${r.paths.join(', ')}`)
  return parts.join(' · ')
}
