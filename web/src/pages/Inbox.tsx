// Every change set waiting on me: the pending change sets of the agents
// I may decide them on (editor or owner), newest first, each with what it
// holds on the server's disk (what counts against the bounds on pending
// change sets: rejecting a large one frees room for new messages).

import { useEffect } from 'react'
import { api } from '../api'
import { ErrorText, Loading, useLoad } from '../feedback'
import { formatBytes, formatTime, shortId } from '../format'
import { waitingWords } from '../review'
import { Link } from '../router'

export function InboxPage({ onCount }: { onCount?: (n: number) => void }) {
  const inbox = useLoad(() => api.inbox(), [])
  useEffect(() => {
    document.title = 'Inbox · Corral'
  }, [])
  useEffect(() => {
    if (inbox.data) onCount?.(inbox.data.length)
  }, [inbox.data])
  return (
    <section>
      <div className="page-head">
        <h1>Inbox</h1>
      </div>
      <p className="muted">Change sets waiting for your decision, on the agents you edit or own.</p>
      <ErrorText error={inbox.error} />
      {inbox.loading && !inbox.data && <Loading what="your inbox" />}
      {inbox.data && inbox.data.length === 0 && <p className="empty">Nothing waits for your review.</p>}
      {inbox.data && inbox.data.length > 0 && (
        <table className="list">
          <caption className="visually-hidden">Change sets waiting for your review</caption>
          <thead>
            <tr>
              <th scope="col">Change set</th>
              <th scope="col">Agent</th>
              <th scope="col">Waiting</th>
              <th scope="col">On disk</th>
              <th scope="col">Created</th>
              <th scope="col">Expires</th>
            </tr>
          </thead>
          <tbody>
            {inbox.data.map((w) => (
              <tr key={w.id}>
                <th scope="row">
                  <Link to={`/changes/${encodeURIComponent(w.id)}`}>change set {shortId(w.id)}</Link>
                  {w.run_id && (
                    <span className="muted small">
                      {' '}
                      from <Link to={`/runs/${encodeURIComponent(w.run_id)}`}>run {shortId(w.run_id)}</Link>
                    </span>
                  )}
                </th>
                <td>
                  <Link to={`/agents/${encodeURIComponent(w.agent_id)}`}>{w.agent_name}</Link>
                </td>
                <td>
                  {waitingWords(w.pending_entries, true)}
                  {w.pending_entries < w.total_entries && <span className="muted small"> (of {w.total_entries})</span>}
                </td>
                <td>{formatBytes(w.disk_bytes)}</td>
                <td>{formatTime(w.created_at)}</td>
                <td>{formatTime(w.expires_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  )
}
