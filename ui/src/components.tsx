// Small pieces every page uses: links that route in the browser, status
// badges, problems, empty states, times, copy buttons, confirmations.
import type { ComponentChildren, JSX } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import type { ApiProblem, JobStatus } from "./api";
import { BASE, isModifiedClick, navigate } from "./router";

export function Link(props: { href: string; children: ComponentChildren; class?: string; "aria-current"?: "page" }) {
  const onClick = (event: MouseEvent) => {
    if (isModifiedClick(event)) return;
    event.preventDefault();
    navigate(props.href);
  };
  return (
    <a href={BASE + props.href} onClick={onClick} class={props.class} aria-current={props["aria-current"]}>
      {props.children}
    </a>
  );
}

const STATUS_TONE: Record<JobStatus, string> = {
  INITIALIZING: "neutral",
  CREATED: "neutral",
  RUNNING: "active",
  FAILING: "warn",
  FAILED: "bad",
  CANCELLING: "warn",
  CANCELED: "muted",
  FINISHED: "good",
  RESTARTING: "warn",
  SUSPENDED: "muted",
  RECONCILING: "active",
};

export function StatusBadge({ status }: { status: JobStatus }) {
  return <span class={`badge tone-${STATUS_TONE[status]}`} data-status={status}>{status}</span>;
}

export function Tone({ tone, children }: { tone: string; children: ComponentChildren }) {
  return <span class={`badge tone-${tone}`}>{children}</span>;
}

/** A problem from ctasd, as a message the user can act on. */
export function ProblemNotice({ problem, title }: { problem: ApiProblem | undefined; title?: string }) {
  if (!problem) return null;
  return (
    <div class="notice notice-bad" role="alert">
      <strong>{title ?? problem.problem.title}</strong>
      <p class="pre-line">{problem.problem.detail}</p>
      {problem.problem.code && <p class="muted small">code: <code>{problem.problem.code}</code></p>}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return <p class="muted" role="status">Loading {what}…</p>;
}

export function Empty({ title, children }: { title: string; children: ComponentChildren }) {
  return (
    <div class="empty">
      <p class="empty-title">{title}</p>
      <div class="muted">{children}</div>
    </div>
  );
}

/** A time as the reader's local time, with the exact instant on hover. */
export function Time({ at }: { at: string | null | undefined }) {
  if (!at) return <span class="muted">—</span>;
  const date = new Date(at);
  return <time dateTime={at} title={at}>{date.toLocaleString()}</time>;
}

export function CopyButton({ text, label }: { text: string; label: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // Without clipboard access (plain http on another host), select the text instead.
      const area = document.createElement("textarea");
      area.value = text;
      document.body.append(area);
      area.select();
      document.execCommand("copy");
      area.remove();
    }
    setCopied(true);
    window.setTimeout(() => setCopied(false), 1500);
  };
  return (
    <button type="button" class="button small" onClick={copy} aria-label={label}>
      {copied ? "Copied" : "Copy"}
    </button>
  );
}

/**
 * A modal question with a cancel and a confirm button; Escape cancels.
 * `busy` disables both while the action runs.
 */
export function Confirm(props: {
  open: boolean;
  title: string;
  children: ComponentChildren;
  confirmLabel: string;
  danger?: boolean;
  busy?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const element = dialog.current;
    if (!element) return;
    if (props.open && !element.open) element.showModal();
    if (!props.open && element.open) element.close();
  }, [props.open]);
  const onCancel = (event: JSX.TargetedEvent<HTMLDialogElement, Event>) => {
    event.preventDefault();
    props.onCancel();
  };
  return (
    <dialog ref={dialog} onCancel={onCancel} aria-labelledby="confirm-title" class="dialog">
      <h2 id="confirm-title">{props.title}</h2>
      <div>{props.children}</div>
      <div class="actions">
        <button type="button" class="button" onClick={props.onCancel} disabled={props.busy}>Cancel</button>
        <button
          type="button"
          class={props.danger ? "button danger" : "button primary"}
          onClick={props.onConfirm}
          disabled={props.busy}
        >
          {props.confirmLabel}
        </button>
      </div>
    </dialog>
  );
}

/** A short form of an id, whole on hover and for screen readers. */
export function ShortId({ id }: { id: string }) {
  return <code title={id} aria-label={id}>{id.length > 12 ? `${id.slice(0, 12)}…` : id}</code>;
}
