// The top of every agent page: its name, the caller's access, its state
// (with Release for the owner when quarantined), its driver when an agent
// CLI runs it, whether the caller accepted someone else's agent as a
// delegation target (with the action that does), and its sections.

import { useState } from 'react'
import { api } from './api'
import { AccessBadge, DriverBadge, StateBadge } from './badges'
import { ErrorText } from './feedback'
import { Link } from './router'
import type { Agent } from './types'
import { WaitingBadge } from './WaitingBadge'

export type Section = 'conversation' | 'runs' | 'changes' | 'files' | 'documents' | 'repository' | 'sharing' | 'settings'

export function AgentHeader({ agent, section, onChange }: { agent: Agent; section: Section; onChange: (a: Agent) => void }) {
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  const base = `/agents/${encodeURIComponent(agent.id)}`
  const tabs: { id: Section; label: string; to: string; show: boolean }[] = [
    { id: 'conversation', label: 'Conversation', to: base, show: true },
    { id: 'runs', label: 'Runs', to: `${base}?tab=runs`, show: true },
    { id: 'changes', label: 'Changes', to: `${base}?tab=changes`, show: true },
    { id: 'files', label: 'Files', to: `${base}?tab=files`, show: true },
    { id: 'documents', label: 'Documents', to: `${base}?tab=documents`, show: true },
    { id: 'repository', label: 'Repository', to: `${base}?tab=repository`, show: true },
    { id: 'sharing', label: 'Sharing', to: `${base}?tab=sharing`, show: agent.can.includes('share') },
    { id: 'settings', label: 'Settings', to: `${base}/settings`, show: true },
  ]

  async function act(fn: () => Promise<Agent>) {
    setBusy(true)
    setError(undefined)
    try {
      onChange(await fn())
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  const release = () => act(() => api.releaseAgent(agent.id))
  const accept = () =>
    act(async () => {
      await api.acceptAgent(agent.id)
      return { ...agent, accepted: true }
    })

  return (
    <div className="agent-head">
      <div className="page-head">
        <h1>{agent.name}</h1>
        <div className="badges">
          <span>
            Your access: <AccessBadge access={agent.access} />
          </span>
          <span>
            State: <StateBadge state={agent.state} />
          </span>
          {agent.driver && agent.driver !== 'builtin' && (
            <span>
              Driver: <DriverBadge driver={agent.driver} />
            </span>
          )}
          <span className="muted">Owner: {agent.owner.name}</span>
        </div>
      </div>
      {agent.state === 'quarantined' && (
        <div className="banner bad">
          <p>
            This agent is quarantined after repeated limit violations: new messages are refused
            {agent.can.includes('release') ? ' until you release it.' : ' until its owner releases it.'}
          </p>
          {agent.can.includes('release') && (
            <button type="button" onClick={release} disabled={busy}>
              Release
            </button>
          )}
        </div>
      )}
      {!agent.accepted && agent.can.includes('send_message') && (
        <div className="banner warn">
          <p>
            {agent.owner.name} shared this agent with you. You can use it, but your runs cannot hand work to it (list_agents,
            delegate) until you accept it as a delegation target.
          </p>
          <button type="button" onClick={accept} disabled={busy}>
            Accept as a delegation target
          </button>
        </div>
      )}
      {agent.state === 'paused' && (
        <div className="banner warn">
          <p>
            This agent is paused: its token budget cannot hold its next model call ({agent.budget.used} of{' '}
            {agent.budget.tokens} tokens used, {agent.budget.left ?? 0} left).
            {agent.can.includes('set_budget') ? ' Raise the budget in Settings to go on.' : ' Its owner can raise the budget.'}
          </p>
        </div>
      )}
      <ErrorText error={error} />
      <nav aria-label="Agent sections" className="tabs">
        {tabs
          .filter((t) => t.show)
          .map((t) => (
            <Link key={t.id} to={t.to} aria-current={t.id === section ? 'page' : undefined}>
              {t.label}
              {t.id === 'changes' && <WaitingBadge n={agent.pending_changes} />}
            </Link>
          ))}
      </nav>
    </div>
  )
}
