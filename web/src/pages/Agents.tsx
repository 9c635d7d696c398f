// The agents the caller can see: their own and those shared with them.

import { useEffect } from 'react'
import { api } from '../api'
import { AccessBadge, StateBadge } from '../badges'
import { ErrorText, Loading, useLoad } from '../feedback'
import { formatTime } from '../format'
import { Link, navigate } from '../router'
import { WaitingBadge } from '../WaitingBadge'

export function AgentsPage() {
  const agents = useLoad(() => api.agents(), [])
  useEffect(() => {
    document.title = 'Agents · Corral'
  }, [])
  return (
    <section>
      <div className="page-head">
        <h1>Agents</h1>
        <button type="button" onClick={() => navigate('/agents/new')}>
          New agent
        </button>
      </div>
      <ErrorText error={agents.error} />
      {agents.loading && !agents.data && <Loading what="agents" />}
      {agents.data && agents.data.length === 0 && (
        <p className="empty">No agents yet. Create one with “New agent”, or open a share link someone sent you.</p>
      )}
      {agents.data && agents.data.length > 0 && (
        <table className="list">
          <caption className="visually-hidden">Your agents and the agents shared with you</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Your access</th>
              <th scope="col">State</th>
              <th scope="col">Owner</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {agents.data.map((a) => (
              <tr key={a.id}>
                <th scope="row">
                  <Link to={`/agents/${encodeURIComponent(a.id)}`}>{a.name}</Link>{' '}
                  {a.pending_changes ? (
                    <Link to={`/agents/${encodeURIComponent(a.id)}?tab=changes`} className="waiting-link">
                      <WaitingBadge n={a.pending_changes} />
                    </Link>
                  ) : null}
                </th>
                <td>
                  <AccessBadge access={a.access} />
                </td>
                <td>
                  <StateBadge state={a.state} />
                </td>
                <td>{a.owner.name}</td>
                <td>{formatTime(a.created_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  )
}
