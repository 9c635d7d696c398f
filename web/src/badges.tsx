// Small labelled tags: a level, a state, a status, a change class, a driver,
// where a document lives.

import { driverInfo } from './drivers'

export function Badge({ kind, value, label }: { kind: string; value: string; label?: string }) {
  return (
    <span className={`badge badge-${kind} badge-${kind}-${value}`} title={label ? `${label}: ${value}` : undefined}>
      {value}
    </span>
  )
}

export function AccessBadge({ access }: { access: string }) {
  return <Badge kind="access" value={access} label="Your access" />
}

export function StateBadge({ state }: { state: string }) {
  return <Badge kind="state" value={state} label="State" />
}

export function StatusBadge({ status }: { status: string }) {
  return <Badge kind="status" value={status} label="Status" />
}

export function ClassBadge({ cls }: { cls: string }) {
  return <Badge kind="class" value={cls} label="Class" />
}

/** What runs the agent, by its short name ("Codex CLI"); its class keeps the id. */
export function DriverBadge({ driver }: { driver: string }) {
  const d = driverInfo(driver)
  return (
    <span className={`badge badge-driver badge-driver-${d.id}`} title={`Driver: ${d.hint}`}>
      {d.label}
    </span>
  )
}

/** Where a document lives: one agent's private store, or the shared library. */
export function SourceBadge({ source }: { source: string }) {
  return <Badge kind="source" value={source} label="Where it lives" />
}
