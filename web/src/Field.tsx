import { useId, type ReactNode } from 'react'

export interface ControlProps {
  id: string
  'aria-describedby'?: string
}

/**
 * A labelled form control. The label points at the control (rather than
 * wrapping it) so the control's accessible name is the label text alone,
 * never the label plus the control's current value.
 */
export function Field({
  label,
  hint,
  className,
  children,
}: {
  label: string
  hint?: ReactNode
  className?: string
  children: (props: ControlProps) => ReactNode
}) {
  const id = useId()
  const hintId = `${id}-hint`
  return (
    <div className={className ? `field ${className}` : 'field'}>
      <label htmlFor={id}>{label}</label>
      {children({ id, 'aria-describedby': hint ? hintId : undefined })}
      {hint && (
        <p id={hintId} className="hint">
          {hint}
        </p>
      )}
    </div>
  )
}
