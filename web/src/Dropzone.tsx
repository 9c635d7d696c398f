// A box things can be dropped on (highlighted while something is over it):
// the archive import's and the documents' uploads.

import { useState, type DragEvent, type ReactNode } from 'react'

/** label names the group for assistive technology; onDrop gets the drop event, already prevented. */
export function Dropzone({ label, onDrop, children }: { label: string; onDrop: (e: DragEvent<HTMLDivElement>) => void; children: ReactNode }) {
  const [over, setOver] = useState(false)
  return (
    <div
      className={over ? 'dropzone over' : 'dropzone'}
      role="group"
      aria-label={label}
      onDragOver={(e) => {
        e.preventDefault()
        setOver(true)
      }}
      onDragLeave={() => setOver(false)}
      onDrop={(e) => {
        e.preventDefault()
        setOver(false)
        onDrop(e)
      }}
    >
      {children}
    </div>
  )
}
