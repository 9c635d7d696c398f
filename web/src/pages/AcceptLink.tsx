// Accepting a share link: the caller gains its level, then lands on the agent.

import { useEffect, useRef, useState } from 'react'
import { api } from '../api'
import { errorMessage, isNotFound } from '../errors'
import { NoAccess } from '../feedback'
import { navigate } from '../router'

export function AcceptLinkPage({ token }: { token: string }) {
  const [error, setError] = useState<unknown>()
  const asked = useRef(false)
  useEffect(() => {
    document.title = 'Share link · Corral'
    if (asked.current) return
    asked.current = true
    api
      .acceptLink(token)
      .then((a) => navigate(`/agents/${encodeURIComponent(a.id)}`, { replace: true }))
      .catch(setError)
  }, [token])
  if (isNotFound(error)) return <NoAccess text="This share link does not exist or has been revoked." />
  if (error) return <NoAccess text={errorMessage(error)} />
  return <p className="muted">Opening the shared agent…</p>
}
