// An agent's network in its settings: none, or an allow-list (presets for
// the well-known registries and hosts of its own) edited as part of the
// agent form and saved with it; the same read-only for a viewer; and the
// timeline's one-click "Allow this host" on a refused request.

import { useCallback, useId, useState } from 'react'
import { api } from './api'
import {
  allowingHost,
  egressOf,
  emptyRow,
  isHostAllowed,
  rowOf,
  ruleWords,
  rulesOf,
  type Egress,
  type NetworkMode,
  type RuleRow,
} from './egress'
import { ErrorText, Loading, useLoad } from './feedback'
import { Field } from './Field'
import type { Agent } from './types'

/** A row of the form, with a key that stays with it when another is removed. */
export interface KeyedRow extends RuleRow {
  key: number
}

let lastKey = 0
function keyed(r: RuleRow): KeyedRow {
  return { ...r, key: ++lastKey }
}

/** What the form holds of the agent's network. */
export interface NetworkValues {
  network: NetworkMode
  presets: string[]
  rows: KeyedRow[]
}

export function networkValuesOf(a?: Agent): NetworkValues {
  const { network, egress } = a ? egressOf(a) : { network: 'none' as const, egress: { allow: [], presets: [] } }
  return { network, presets: egress.presets, rows: egress.allow.map((r) => keyed(rowOf(r))) }
}

/** The policy fields to send; throws an Error in words for a row that is not a rule. */
export function networkRequestOf(v: NetworkValues): { network: NetworkMode; egress: Egress } {
  return { network: v.network, egress: { allow: rulesOf(v.rows), presets: v.presets } }
}

const modes: { id: NetworkMode; label: string }[] = [
  { id: 'none', label: 'None: runs reach no network' },
  { id: 'allowlist', label: 'Allow-list: only the hosts below' },
]

const rulesHint =
  'Ports: comma-separated; empty means 80 and 443. Methods and path prefixes: empty means any. ' +
  'A host that names methods or paths is checked request by request, so Corral’s egress proxy opens its HTTPS ' +
  '(with this server’s certificate authority, which the sandbox trusts).'

/** The Network part of the agent form. */
export function NetworkFieldset({ value, onChange }: { value: NetworkValues; onChange: (v: NetworkValues) => void }) {
  const presets = useLoad(() => api.egressPresets(), [])
  const id = useId()
  const set = (patch: Partial<NetworkValues>) => onChange({ ...value, ...patch })
  const setRow = (key: number, patch: Partial<RuleRow>) => set({ rows: value.rows.map((r) => (r.key === key ? { ...r, ...patch } : r)) })
  const togglePreset = (name: string, on: boolean) =>
    set({ presets: on ? [...value.presets, name] : value.presets.filter((p) => p !== name) })
  // The server's presets, then any the agent names that this server does not offer (kept as they are).
  const offered = presets.data ?? []
  const unknown = value.presets.filter((p) => !offered.some((o) => o.name === p))

  return (
    <fieldset className="network">
      <legend>Network</legend>
      <div className="row" role="radiogroup" aria-label="Network access">
        {modes.map((m) => (
          <label key={m.id} className="choice">
            <input type="radio" name={`${id}-network`} value={m.id} checked={value.network === m.id} onChange={() => set({ network: m.id })} />{' '}
            {m.label}
          </label>
        ))}
      </div>
      <p className="hint">
        {value.network === 'none'
          ? 'Runs reach only Corral’s model gateway. The allow-list below is kept, and applies once you choose it.'
          : 'Runs reach these hosts through Corral’s egress proxy, and nothing else; the timeline shows what it refused.'}
      </p>
      <div role="group" aria-labelledby={`${id}-presets`} className="field">
        <span id={`${id}-presets`} className="group-label">
          Registries
        </span>
        {presets.loading && !presets.data && <Loading what="the registries" />}
        <ErrorText error={presets.error} />
        <div className="presets">
          {offered.map((p) => (
            <label key={p.name} className="choice">
              <input type="checkbox" checked={value.presets.includes(p.name)} onChange={(e) => togglePreset(p.name, e.target.checked)} />{' '}
              {p.name}: {p.hosts.join(', ')}
            </label>
          ))}
          {unknown.map((name) => (
            <label key={name} className="choice">
              <input type="checkbox" checked onChange={() => togglePreset(name, false)} /> {name} (not offered by this server)
            </label>
          ))}
        </div>
      </div>
      <div role="group" aria-labelledby={`${id}-hosts`} aria-describedby={`${id}-hosts-hint`} className="field">
        <span id={`${id}-hosts`} className="group-label">
          Hosts of its own
        </span>
        <p id={`${id}-hosts-hint`} className="hint">
          {rulesHint}
        </p>
        {value.rows.length === 0 && <p className="empty">None.</p>}
        {value.rows.length > 0 && (
          <ol className="egress-rules">
            {value.rows.map((r, i) => (
              <li key={r.key} className="egress-rule" role="group" aria-label={`Allowed host ${i + 1}`}>
                <Field label="Host">
                  {(p) => (
                    <input {...p} value={r.host} placeholder="registry.example.com" onChange={(e) => setRow(r.key, { host: e.target.value })} />
                  )}
                </Field>
                <Field label="Ports">
                  {(p) => <input {...p} value={r.ports} placeholder="80, 443" onChange={(e) => setRow(r.key, { ports: e.target.value })} />}
                </Field>
                <Field label="Methods">
                  {(p) => <input {...p} value={r.methods} placeholder="any" onChange={(e) => setRow(r.key, { methods: e.target.value })} />}
                </Field>
                <Field label="Path prefixes">
                  {(p) => <input {...p} value={r.paths} placeholder="any" onChange={(e) => setRow(r.key, { paths: e.target.value })} />}
                </Field>
                <button
                  type="button"
                  className="secondary small"
                  aria-label={`Remove allowed host ${i + 1}`}
                  onClick={() => set({ rows: value.rows.filter((x) => x.key !== r.key) })}
                >
                  Remove
                </button>
              </li>
            ))}
          </ol>
        )}
        <div>
          <button type="button" className="secondary small" onClick={() => set({ rows: [...value.rows, keyed(emptyRow)] })}>
            Add a host
          </button>
        </div>
      </div>
    </fieldset>
  )
}

/** The agent's network for someone who reads the settings (facts of the settings' list). */
export function NetworkFacts({ agent }: { agent: Agent }) {
  const { network, egress } = egressOf(agent)
  return (
    <>
      <div className="fact">
        <dt>Network</dt>
        <dd>{network === 'allowlist' ? 'allow-list' : 'none'}</dd>
      </div>
      <div className="fact">
        <dt>Registries</dt>
        <dd>{egress.presets.length > 0 ? egress.presets.join(', ') : 'none'}</dd>
      </div>
      <div className="fact">
        <dt>Allowed hosts</dt>
        <dd>
          {egress.allow.length === 0 ? (
            'none'
          ) : (
            <ul className="plain">
              {egress.allow.map((r, i) => (
                <li key={i}>{ruleWords(r)}</li>
              ))}
            </ul>
          )}
        </dd>
      </div>
    </>
  )
}

/** What the timeline needs to offer "Allow this host" on a refused request. */
export interface HostAllower {
  isAllowed: (host: string, port?: number) => boolean
  allow: (host: string, port?: number) => Promise<void>
}

/**
 * "Allow this host" for those who may edit the agent (undefined for anyone
 * else): it reads the agent again, so the rest of the allow-list is kept as
 * it now is, adds the host and turns the allow-list on.
 */
export function useHostAllower(agent: Agent | undefined, onChange?: (a: Agent) => void): HostAllower | undefined {
  const allow = useCallback(
    async (host: string, port?: number) => {
      if (!agent) return
      const fresh = await api.agent(agent.id)
      const updated = await api.updateAgent(agent.id, { policy: allowingHost(fresh, host, port) })
      onChange?.(updated)
    },
    [agent?.id, onChange],
  )
  if (!agent || !agent.can.includes('edit_agent')) return undefined
  return { isAllowed: (host, port) => isHostAllowed(agent, host, port), allow }
}

/** The button on a refused request's timeline entry. */
export function AllowHostButton({ host, port, allower }: { host: string; port?: number; allower: HostAllower }) {
  const [state, setState] = useState<'idle' | 'busy' | 'done'>('idle')
  const [error, setError] = useState<unknown>()
  const allowed = allower.isAllowed(host, port)

  async function go() {
    setState('busy')
    setError(undefined)
    try {
      await allower.allow(host, port)
      setState('done')
    } catch (err) {
      setError(err)
      setState('idle')
    }
  }

  return (
    <div className="tl-action">
      <button
        type="button"
        className="secondary small"
        aria-label={`Allow this host: ${host}`}
        disabled={state !== 'idle' || allowed}
        onClick={() => void go()}
      >
        Allow this host
      </button>
      {state === 'done' && (
        <span role="status" className="ok small">
          Allowed {host}: the agent’s next runs may reach it.
        </span>
      )}
      {state !== 'done' && allowed && <span className="muted small">{host} is on the allow-list now.</span>}
      <ErrorText error={error} />
    </div>
  )
}
