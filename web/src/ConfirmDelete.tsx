// A Delete button that asks once more, inline, before it deletes: the one
// confirm of the files tab and the documents.

import { useState } from 'react'
import { ErrorText } from './feedback'

/**
 * name labels the button ("Delete NAME") and the confirm; question is asked;
 * remove deletes (its error is shown in place), then onDeleted follows.
 */
export function ConfirmDelete({ name, question, remove, onDeleted }: { name: string; question: string; remove: () => Promise<void>; onDeleted: () => void }) {
  const [confirming, setConfirming] = useState(false)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>()

  async function go() {
    setBusy(true)
    setError(undefined)
    try {
      await remove()
      setConfirming(false)
      onDeleted()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }

  if (!confirming) {
    return (
      <button type="button" className="secondary small" aria-label={`Delete ${name}`} onClick={() => setConfirming(true)}>
        Delete
      </button>
    )
  }
  return (
    <div className="confirm" role="group" aria-label={`Confirm deleting ${name}`}>
      <span>{question}</span>{' '}
      <button type="button" className="danger small" onClick={go} disabled={busy}>
        Yes, delete
      </button>{' '}
      <button type="button" className="secondary small" onClick={() => setConfirming(false)}>
        Cancel
      </button>
      <ErrorText error={error} />
    </div>
  )
}
