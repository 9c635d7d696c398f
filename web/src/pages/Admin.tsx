// The administrators' page: people (disable, enable, invite), the sandbox
// nodes (drain, move an agent), the runs in flight (stop, kill), usage over
// time and every budget's state. Each section loads on its own, so one that
// fails (a server without nodes) leaves the others working. The server
// decides who is an admin: this page only hides itself from others.

import { useEffect, useState, type FormEvent } from 'react'
import { api } from '../api'
import { ErrorText, Loading, useLoad } from '../feedback'
import { Field } from '../Field'
import { formatTime } from '../format'
import { useSession } from '../session'
import type { Invite, ListedUser, NodeInfo } from '../types'
import { RunsInFlight, Budgets } from '../AdminRuns'
import { UsageChart } from '../UsageChart'

/** A button that runs one call, shows that it is busy and what went wrong. */
function Action({ label, aria, onRun, danger }: { label: string; aria: string; onRun: () => Promise<unknown>; danger?: boolean }) {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>()
  async function run() {
    setBusy(true)
    setError(undefined)
    try {
      await onRun()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  return (
    <>
      <button type="button" className={`${danger ? 'danger' : 'secondary'} small`} aria-label={aria} onClick={run} disabled={busy}>
        {label}
      </button>
      <ErrorText error={error} />
    </>
  )
}

function InviteSomeone() {
  const [invite, setInvite] = useState<Invite>()
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  async function create() {
    setBusy(true)
    setError(undefined)
    try {
      setInvite(await api.createInvite())
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  const link = invite ? `${window.location.origin}/signup?invite=${encodeURIComponent(invite.token)}` : ''
  return (
    <div className="stack">
      <div>
        <button type="button" onClick={create} disabled={busy}>
          Invite someone
        </button>
      </div>
      <ErrorText error={error} />
      {invite && (
        <p role="status" className="ok">
          Send this link to the person you invite; it works once, until {formatTime(invite.expires_at)}, and is not shown again:{' '}
          <code className="invite-link">{link}</code>{' '}
          <button type="button" className="secondary small" onClick={() => void navigator.clipboard?.writeText(link)}>
            Copy
          </button>
        </p>
      )}
    </div>
  )
}

function People() {
  const { user: me } = useSession()
  const users = useLoad(() => api.users(), [])
  const replace = (u: ListedUser) => users.data && users.setData(users.data.map((x) => (x.id === u.id ? { ...x, ...u } : x)))
  return (
    <section aria-labelledby="people-heading" className="stack">
      <h2 id="people-heading">People</h2>
      <ErrorText error={users.error} />
      {users.loading && !users.data && <Loading what="the accounts" />}
      {users.data && (
        <table className="list" aria-label="Accounts">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Email</th>
              <th scope="col">Role</th>
              <th scope="col">Since</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {users.data.map((u) => (
              <tr key={u.id}>
                <th scope="row">{u.name}</th>
                <td>
                  {u.email}
                  {u.email_ascii && <span className="muted"> ({u.email_ascii})</span>}
                  {u.email_mixed_script && <span className="warn-text"> mixes scripts: may imitate another address</span>}
                </td>
                <td>{u.disabled ? 'disabled' : u.admin ? 'admin' : 'user'}</td>
                <td>{formatTime(u.created_at)}</td>
                <td>
                  {u.id === me?.id ? (
                    <span className="muted">you</span>
                  ) : u.disabled ? (
                    <Action label="Enable" aria={`Enable ${u.name}`} onRun={async () => replace({ ...u, ...(await api.enableUser(u.id)) })} />
                  ) : (
                    <Action label="Disable" aria={`Disable ${u.name}`} danger onRun={async () => replace({ ...u, ...(await api.disableUser(u.id)) })} />
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p className="muted">Disabling an account ends its sessions and tokens at once; its agents stay, and their owners' grants with them.</p>
      <InviteSomeone />
    </section>
  )
}

function MoveAgent({ node }: { node: NodeInfo }) {
  // Every agent, whoever owns it: the budgets list is the administrators' list of all agents.
  const agents = useLoad(() => api.budgets(), [])
  const [agent, setAgent] = useState('')
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>()
  const [moved, setMoved] = useState('')
  async function submit(e: FormEvent) {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    setMoved('')
    try {
      await api.moveAgent(node.id, agent)
      setMoved(agents.data?.find((a) => a.agent_id === agent)?.agent_name ?? agent)
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  return (
    <form onSubmit={submit} className="inline" aria-label={`Move an agent to ${node.name}`}>
      <Field label={`Agent to move to ${node.name}`}>
        {(p) => (
          <select {...p} required value={agent} onChange={(e) => setAgent(e.target.value)}>
            <option value="">Choose an agent</option>
            {agents.data?.map((a) => (
              <option key={a.agent_id} value={a.agent_id}>
                {a.agent_name} ({a.owner.name})
              </option>
            ))}
          </select>
        )}
      </Field>
      <button type="submit" className="secondary small" disabled={busy || agent === ''}>
        Move here
      </button>
      {moved && (
        <span role="status" className="ok">
          {' '}
          Moved {moved}.
        </span>
      )}
      <ErrorText error={error ?? agents.error} />
    </form>
  )
}

function Nodes() {
  const nodes = useLoad(() => api.nodes(), [])
  // A server of role all runs its sandboxes itself: it has no nodes to show.
  const own = (nodes.error as { code?: string } | undefined)?.code === 'unavailable'
  return (
    <section aria-labelledby="nodes-heading" className="stack">
      <h2 id="nodes-heading">Sandbox nodes</h2>
      {own ? <p className="muted">This server runs its sandboxes itself: it has no sandbox nodes.</p> : <ErrorText error={nodes.error} />}
      {nodes.loading && !nodes.data && <Loading what="the nodes" />}
      {nodes.data && nodes.data.length === 0 && <p className="empty">No node has joined yet: make a join token with corral node token.</p>}
      {nodes.data && nodes.data.length > 0 && (
        <table className="list" aria-label="Sandbox nodes">
          <thead>
            <tr>
              <th scope="col">Node</th>
              <th scope="col">Status</th>
              <th scope="col">Runs</th>
              <th scope="col">Last seen</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {nodes.data.map((n) => (
              <tr key={n.id}>
                <th scope="row">{n.name}</th>
                <td>
                  {n.status}
                  {n.refused_connections > 0 && <span className="warn-text"> ({n.refused_connections} connections with its credential refused)</span>}
                </td>
                <td>
                  {n.runs}
                  {n.max_sessions > 0 && ` of ${n.max_sessions}`}
                </td>
                <td>{n.last_seen ? formatTime(n.last_seen) : 'never'}</td>
                <td className="stack">
                  {n.status === 'draining' ? (
                    <Action label="Undrain" aria={`Undrain ${n.name}`} onRun={async () => (await api.undrainNode(n.id), nodes.reload())} />
                  ) : (
                    <Action label="Drain" aria={`Drain ${n.name}`} onRun={async () => (await api.drainNode(n.id), nodes.reload())} />
                  )}
                  {n.status === 'ready' && <MoveAgent node={n} />}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  )
}

export function AdminPage() {
  const { user } = useSession()
  useEffect(() => {
    document.title = 'Admin · Corral'
  }, [])
  if (!user?.admin) {
    return (
      <section>
        <h1>Admin</h1>
        <p className="empty">Only an administrator sees this page.</p>
      </section>
    )
  }
  return (
    <section className="admin stack">
      <h1>Admin</h1>
      <RunsInFlight />
      <UsageChart />
      <Budgets />
      <People />
      <Nodes />
    </section>
  )
}
