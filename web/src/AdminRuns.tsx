// The administrators' view of what is happening now: every run in flight
// (with stop and kill) and every agent's budget with its open reservations.

import { useEffect } from 'react'
import { api } from './api'
import { ErrorText, Loading, useLoad } from './feedback'
import { Link } from './router'
import { formatDuration } from './format'

/** How often the runs in flight are asked again while the page is visible. */
const inFlightPollMs = 5_000

/** A token count in words a person reads at a glance: 12,345. */
export function formatTokens(n: number): string {
  return n.toLocaleString('en')
}

export function RunsInFlight() {
  const runs = useLoad(() => api.runsInFlight(), [])
  const { reload } = runs
  useEffect(() => {
    const t = setInterval(() => {
      if (!document.hidden) void reload()
    }, inFlightPollMs)
    return () => clearInterval(t)
  }, [reload])
  return (
    <section aria-labelledby="inflight-heading" className="stack">
      <h2 id="inflight-heading">Runs in flight</h2>
      <ErrorText error={runs.error} />
      {runs.loading && !runs.data && <Loading what="the runs in flight" />}
      {runs.data && runs.data.length === 0 && <p className="empty">No run is in flight.</p>}
      {runs.data && runs.data.length > 0 && (
        <table className="list" aria-label="Runs in flight">
          <thead>
            <tr>
              <th scope="col">Agent</th>
              <th scope="col">Owner</th>
              <th scope="col">Asked by</th>
              <th scope="col">Status</th>
              <th scope="col">For</th>
              <th scope="col">Tokens</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {runs.data.map((r) => (
              <tr key={r.id}>
                <th scope="row">
                  <Link to={`/runs/${r.id}`}>{r.agent_name}</Link>
                </th>
                <td>{r.owner.name}</td>
                <td>{r.triggered_by?.name ?? 'a removed account'}</td>
                <td>{r.status}</td>
                <td>{formatDuration(r.started_at ?? r.created_at, null)}</td>
                <td>{formatTokens(r.tokens.input + r.tokens.output)}</td>
                <td>
                  <button
                    type="button"
                    className="secondary small"
                    aria-label={`Stop the run of ${r.agent_name}`}
                    onClick={() => void api.stopRun(r.id).finally(reload)}
                  >
                    Stop
                  </button>{' '}
                  <button
                    type="button"
                    className="danger small"
                    aria-label={`Kill the run of ${r.agent_name}`}
                    onClick={() => void api.killRun(r.id).finally(reload)}
                  >
                    Kill
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  )
}

export function Budgets() {
  const budgets = useLoad(() => api.budgets(), [])
  return (
    <section aria-labelledby="budgets-heading" className="stack">
      <h2 id="budgets-heading">Budgets</h2>
      <p className="muted">
        Every agent's token budget: what its calls used, what calls in flight hold reserved until the provider says what they spent, and
        what is left.
      </p>
      <ErrorText error={budgets.error} />
      {budgets.loading && !budgets.data && <Loading what="the budgets" />}
      {budgets.data && budgets.data.length === 0 && <p className="empty">No agent yet.</p>}
      {budgets.data && budgets.data.length > 0 && (
        <table className="list" aria-label="Budgets">
          <thead>
            <tr>
              <th scope="col">Agent</th>
              <th scope="col">Owner</th>
              <th scope="col">Budget</th>
              <th scope="col">Used</th>
              <th scope="col">Reserved</th>
              <th scope="col">Left</th>
              <th scope="col">Open calls</th>
            </tr>
          </thead>
          <tbody>
            {budgets.data.map((b) => (
              <tr key={b.agent_id}>
                <th scope="row">
                  <Link to={`/agents/${b.agent_id}`}>{b.agent_name}</Link>
                </th>
                <td>{b.owner.name}</td>
                <td>{b.budget.tokens === 0 ? 'unlimited' : formatTokens(b.budget.tokens)}</td>
                <td>{formatTokens(b.budget.used)}</td>
                <td>{formatTokens(b.budget.reserved)}</td>
                <td>{b.budget.left === null ? '—' : formatTokens(b.budget.left)}</td>
                <td>{b.open_reservations}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  )
}
