// Agents' names for pages that hold only their ids (a delegation tree, a
// run's `delegated` events): one request for the list of agents the viewer
// can see, asked again only when an id not asked about before appears (a
// tree may create agents as it goes). An id without a name stays unnamed:
// the page shows a short id instead.

import { useEffect, useRef, useState } from 'react'
import { api } from './api'

export function useAgentNames(ids: string[]): ReadonlyMap<string, string> {
  const [names, setNames] = useState<ReadonlyMap<string, string>>(() => new Map())
  const asked = useRef(new Set<string>())
  const key = [...new Set(ids)].sort().join(' ')
  useEffect(() => {
    const fresh = key.split(' ').filter((id) => id !== '' && !asked.current.has(id))
    if (fresh.length === 0) return
    for (const id of fresh) asked.current.add(id)
    let live = true
    let answered = false
    api
      .agents()
      .then((list) => {
        answered = true
        if (live) setNames((old) => new Map([...old, ...list.map((a): [string, string] => [a.id, a.name])]))
      })
      // The short ids stay shown instead: a name is a nicety, not worth an error on the page.
      .catch(() => {})
    return () => {
      live = false
      // An answer dropped before it came is asked for again by the next effect.
      if (!answered) for (const id of fresh) asked.current.delete(id)
    }
  }, [key])
  return names
}
