// What a page shows while it loads, when something failed, and when the
// thing asked for is not there (or not ours to see: the API answers both
// with 404, and so do we).

import { useCallback, useEffect, useRef, useState, type DependencyList } from 'react'
import { errorMessage } from './errors'
import { Link } from './router'

export const noAccessText = 'This agent does not exist or you no longer have access to it.'

export function ErrorText({ error }: { error: unknown }) {
  if (error === undefined || error === null) return null
  return (
    <p role="alert" className="error">
      {errorMessage(error)}
    </p>
  )
}

export function Loading({ what }: { what: string }) {
  return <p className="muted">Loading {what}…</p>
}

export function NoAccess({ text = noAccessText }: { text?: string }) {
  return (
    <div className="notice">
      <h1>Not available</h1>
      <p role="alert">{text}</p>
      <p>
        <Link to="/">Back to your agents</Link>
      </p>
    </div>
  )
}

export interface Loaded<T> {
  data?: T
  error?: unknown
  loading: boolean
  /** Loads again; the data already shown stays until the answer comes. */
  reload: () => Promise<void>
  setData: (d: T) => void
}

/** Loads data when deps change; a late answer for old deps is dropped. */
export function useLoad<T>(load: () => Promise<T>, deps: DependencyList): Loaded<T> {
  const [data, setData] = useState<T>()
  const [error, setError] = useState<unknown>()
  const [loading, setLoading] = useState(true)
  const generation = useRef(0)
  // The caller names what load depends on, as for useEffect.
  const run = useCallback(load, deps)
  const reload = useCallback(async () => {
    const g = ++generation.current
    try {
      const d = await run()
      if (g !== generation.current) return
      setData(d)
      setError(undefined)
    } catch (e) {
      if (g !== generation.current) return
      setError(e)
    } finally {
      if (g === generation.current) setLoading(false)
    }
  }, [run])
  useEffect(() => {
    setData(undefined)
    setError(undefined)
    setLoading(true)
    void reload()
    return () => {
      generation.current++
    }
  }, [reload])
  return { data, error, loading, reload, setData }
}
