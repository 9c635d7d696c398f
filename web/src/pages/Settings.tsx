// Creating an agent and changing its settings. An editor changes the
// instructions, model, driver, policy (its network too) and limits, and
// adds and deletes its secrets; only the owner sets the budget and
// deletes; a viewer or runner reads the settings and the secrets' list.

import { useEffect, useState, type FormEvent, type ReactNode } from 'react'
import { api } from '../api'
import { AgentHeader } from '../AgentHeader'
import { driverFieldHint, driverInfo, drivers } from '../drivers'
import type { AgentRequestWithEgress } from '../egress'
import { ApiError, errorMessage, isNotFound } from '../errors'
import { ErrorText, Loading, NoAccess, useLoad } from '../feedback'
import { Field } from '../Field'
import { ModelPicker } from '../ModelPicker'
import { NetworkFacts, NetworkFieldset, networkRequestOf, networkValuesOf, type NetworkValues } from '../Network'
import { navigate } from '../router'
import { SecretsSection } from '../Secrets'
import type { Agent, Driver, Limits, Policy } from '../types'
import { defaultWords, formatLimit, fromHuman, limitFields, toHuman, units, type HumanValue } from '../units'

interface FormValues {
  name: string
  instructions: string
  model: string
  driver: Driver
  fs: Policy['fs']
  changes: Policy['changes']
  library: boolean
  net: NetworkValues
  limits: Record<keyof Limits, HumanValue>
  budget: string
}

function valuesOf(a?: Agent): FormValues {
  const limits = {} as Record<keyof Limits, HumanValue>
  for (const f of limitFields) limits[f.key] = toHuman(f.kind, a?.limits?.[f.key] ?? 0)
  return {
    name: a?.name ?? '',
    instructions: a?.instructions ?? '',
    model: a?.model ?? '',
    driver: a?.driver ?? 'builtin',
    fs: a?.policy.fs ?? 'read-write',
    changes: a?.policy.changes ?? 'review',
    library: a?.policy.library ?? false,
    net: networkValuesOf(a),
    limits,
    budget: String(a?.budget.tokens ?? 0),
  }
}

const libraryHint =
  'Search the documents anyone on this server publishes to the library, besides the agent’s own. ' +
  'They reach the model marked as untrusted material written by other people, not instructions.'

/** Builds the request body, or throws an ApiError-like message for a number (or an allowed host) that is not one. */
function requestOf(v: FormValues, withBudget: boolean, withNetwork: boolean): AgentRequestWithEgress {
  const whole = (label: string, s: string): number => {
    const t = s.trim()
    if (t === '') return 0
    if (!/^\d+$/.test(t)) throw new ApiError(400, 'invalid_input', `${label} must be a whole number, 0 or more.`)
    return Number(t)
  }
  const limits = {} as Limits
  for (const f of limitFields) {
    try {
      limits[f.key] = fromHuman(f.kind, v.limits[f.key].value, v.limits[f.key].unit)
    } catch (err) {
      throw new ApiError(400, 'invalid_input', `${f.label} ${(err as Error).message}`)
    }
  }
  let network: Partial<ReturnType<typeof networkRequestOf>> = {}
  if (withNetwork) {
    try {
      network = networkRequestOf(v.net)
    } catch (err) {
      throw new ApiError(400, 'invalid_input', (err as Error).message)
    }
  }
  const body: AgentRequestWithEgress = {
    name: v.name.trim(),
    instructions: v.instructions,
    model: v.model.trim(),
    driver: v.driver,
    policy: { fs: v.fs, changes: v.changes, library: v.library, ...network },
    limits,
  }
  if (withBudget) body.budget = { tokens: whole('Token budget', v.budget) }
  return body
}

function LimitField({
  field,
  value,
  hint,
  onChange,
}: {
  field: (typeof limitFields)[number]
  value: HumanValue
  hint: ReactNode
  onChange: (v: HumanValue) => void
}) {
  const choices = units[field.kind]
  return (
    <Field label={field.label} hint={hint}>
      {(p) => (
        <div className="limit-input">
          <input
            {...p}
            inputMode="decimal"
            placeholder="default"
            value={value.value}
            onChange={(e) => onChange({ ...value, value: e.target.value })}
          />
          {choices.length > 1 && (
            <select aria-label={`${field.label} unit`} value={value.unit} onChange={(e) => onChange({ ...value, unit: e.target.value })}>
              {choices.map((u) => (
                <option key={u.id} value={u.id}>
                  {u.id}
                </option>
              ))}
            </select>
          )}
        </div>
      )}
    </Field>
  )
}

export function AgentForm({
  agent,
  submitLabel,
  withBudget,
  withNetwork = false,
  onSubmit,
  children,
}: {
  agent?: Agent
  submitLabel: string
  withBudget: boolean
  /** Offers the network (none or the egress allow-list) and sends it. */
  withNetwork?: boolean
  onSubmit: (body: AgentRequestWithEgress) => Promise<void>
  /** More fields, after the agent's own (the new-agent page's workspace source). */
  children?: ReactNode
}) {
  const [v, setV] = useState<FormValues>(() => valuesOf(agent))
  const models = useLoad(() => api.models(), [])
  const limitsInfo = useLoad(() => api.limits(), [])
  const [error, setError] = useState<unknown>()
  const [saved, setSaved] = useState(false)
  const [busy, setBusy] = useState(false)

  async function submit(e: FormEvent) {
    e.preventDefault()
    setError(undefined)
    setSaved(false)
    setBusy(true)
    try {
      await onSubmit(requestOf(v, withBudget, withNetwork))
      setSaved(true)
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }

  const set = <K extends keyof FormValues>(k: K, value: FormValues[K]) => {
    setSaved(false)
    setV((old) => ({ ...old, [k]: value }))
  }

  return (
    <form onSubmit={submit} className="stack agent-form">
      <Field label="Name">{(p) => <input {...p} required value={v.name} onChange={(e) => set('name', e.target.value)} />}</Field>
      <Field label="Instructions">
        {(p) => <textarea {...p} rows={6} value={v.instructions} onChange={(e) => set('instructions', e.target.value)} />}
      </Field>
      {models.loading && !models.data && !models.error ? (
        <Loading what="the models" />
      ) : (
        <ModelPicker value={v.model} onChange={(m) => set('model', m)} models={models.data} />
      )}
      <Field label="Driver" hint={driverFieldHint}>
        {(p) => (
          <select {...p} value={v.driver} onChange={(e) => set('driver', e.target.value as Driver)}>
            {drivers.map((d) => (
              <option key={d.id} value={d.id}>
                {d.hint}
              </option>
            ))}
            {/* One a newer server knows and this page does not: kept as it is. */}
            {!drivers.some((d) => d.id === v.driver) && <option value={v.driver}>{v.driver}</option>}
          </select>
        )}
      </Field>
      <fieldset>
        <legend>Policy</legend>
        <div className="row">
          <Field label="Workspace access">
            {(p) => (
              <select {...p} value={v.fs} onChange={(e) => set('fs', e.target.value as Policy['fs'])}>
                <option value="read-write">read-write (writes are staged as proposals)</option>
                <option value="read-only">read-only</option>
              </select>
            )}
          </Field>
          <Field label="Changes">
            {(p) => (
              <select {...p} value={v.changes} onChange={(e) => set('changes', e.target.value as Policy['changes'])}>
                <option value="review">review: every change waits for a person</option>
                <option value="auto">auto: ordinary changes apply at once</option>
              </select>
            )}
          </Field>
        </div>
        <div className="field">
          <label className="choice">
            <input
              type="checkbox"
              checked={v.library}
              aria-describedby="library-hint"
              onChange={(e) => set('library', e.target.checked)}
            />{' '}
            Use the shared library
          </label>
          <p id="library-hint" className="hint">
            {libraryHint}
          </p>
        </div>
      </fieldset>
      {withNetwork && <NetworkFieldset value={v.net} onChange={(n) => set('net', n)} />}
      <fieldset>
        <legend>Limits</legend>
        <p className="hint">Leave a field empty for the server’s default, shown under it.</p>
        <div className="grid">
          {limitFields.map((f) => (
            <LimitField
              key={f.key}
              field={f}
              value={v.limits[f.key]}
              hint={defaultWords(f.key, f.kind, limitsInfo.data, v)}
              onChange={(h) => set('limits', { ...v.limits, [f.key]: h })}
            />
          ))}
        </div>
      </fieldset>
      {withBudget && (
        <fieldset>
          <legend>Budget</legend>
          <Field
            label="Token budget"
            hint={`0 means unlimited.${agent ? ` Used so far: ${agent.budget.used} tokens.` : ''}`}
          >
            {(p) => <input {...p} inputMode="numeric" value={v.budget} onChange={(e) => set('budget', e.target.value)} />}
          </Field>
        </fieldset>
      )}
      {children}
      <ErrorText error={error} />
      {saved && (
        <p className="ok" aria-live="polite">
          Saved.
        </p>
      )}
      <div>
        <button type="submit" disabled={busy}>
          {submitLabel}
        </button>
      </div>
    </form>
  )
}

export function SettingsPage({ id }: { id: string }) {
  const agent = useLoad(() => api.agent(id), [id])
  useEffect(() => {
    if (agent.data) document.title = `${agent.data.name} settings · Corral`
  }, [agent.data])
  if (isNotFound(agent.error)) return <NoAccess />
  if (!agent.data) return agent.error ? <ErrorText error={agent.error} /> : <Loading what="the agent" />
  const a = agent.data
  return (
    <section>
      <AgentHeader agent={a} section="settings" onChange={agent.setData} />
      <h2>Settings</h2>
      {a.can.includes('edit_agent') ? (
        <AgentForm
          key={a.id}
          agent={a}
          submitLabel="Save"
          withBudget={a.can.includes('set_budget')}
          withNetwork
          onSubmit={async (body) => agent.setData(await api.updateAgent(a.id, body))}
        />
      ) : (
        <ReadOnlySettings agent={a} />
      )}
      {!a.can.includes('set_budget') && (
        <p className="muted">
          Token budget: {a.budget.tokens === 0 ? 'unlimited' : `${a.budget.tokens} tokens`}; used {a.budget.used}.
        </p>
      )}
      <SecretsSection agent={a} />
      {a.can.includes('delete_agent') && <DeleteAgent agent={a} />}
    </section>
  )
}

function ReadOnlySettings({ agent }: { agent: Agent }) {
  const limits = useLoad(() => api.limits(), [])
  return (
    <>
      <p className="muted">Your access lets you read these settings; an editor or the owner changes them.</p>
      <dl className="facts">
        <div className="fact">
          <dt>Instructions</dt>
          <dd className="pre">{agent.instructions || '—'}</dd>
        </div>
        <div className="fact">
          <dt>Model</dt>
          <dd>{agent.model || 'the server’s default'}</dd>
        </div>
        <div className="fact">
          <dt>Driver</dt>
          <dd>{driverInfo(agent.driver).hint}</dd>
        </div>
        <div className="fact">
          <dt>Workspace access</dt>
          <dd>{agent.policy.fs}</dd>
        </div>
        <div className="fact">
          <dt>Changes</dt>
          <dd>{agent.policy.changes}</dd>
        </div>
        <div className="fact">
          <dt>Shared library</dt>
          <dd>{agent.policy.library ? 'searched' : 'not searched'}</dd>
        </div>
        <NetworkFacts agent={agent} />
        {limitFields.map((f) => (
          <div key={f.key} className="fact">
            <dt>{f.label}</dt>
            <dd>
              {agent.limits[f.key]
                ? formatLimit(f.kind, agent.limits[f.key])
                : `server default${limits.data ? ` (${formatLimit(f.kind, limits.data.defaults[f.key])})` : ''}`}
            </dd>
          </div>
        ))}
      </dl>
    </>
  )
}

function DeleteAgent({ agent }: { agent: Agent }) {
  const [confirming, setConfirming] = useState(false)
  const [error, setError] = useState<string>()
  const [busy, setBusy] = useState(false)
  async function remove() {
    setBusy(true)
    setError(undefined)
    try {
      await api.deleteAgent(agent.id)
      navigate('/', { replace: true })
    } catch (err) {
      setError(errorMessage(err))
      setBusy(false)
    }
  }
  return (
    <section className="danger" aria-labelledby="delete-heading">
      <h2 id="delete-heading">Delete</h2>
      <p>Deleting the agent removes its conversation, runs, change sets and workspace for everyone it is shared with.</p>
      {!confirming ? (
        <button type="button" className="danger" onClick={() => setConfirming(true)}>
          Delete agent
        </button>
      ) : (
        <div className="row">
          <p>
            Delete <strong>{agent.name}</strong> for good?
          </p>
          <button type="button" className="danger" onClick={remove} disabled={busy}>
            Yes, delete it
          </button>
          <button type="button" className="secondary" onClick={() => setConfirming(false)}>
            Cancel
          </button>
        </div>
      )}
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
    </section>
  )
}
