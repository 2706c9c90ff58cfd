/** An error answer of the server: its status and `{error: {code, message}}`. */
export class AgentTowerError extends Error {
  constructor(
    readonly status: number,
    readonly code: string | undefined,
    message: string,
  ) {
    super(message);
    this.name = "AgentTowerError";
  }
}

/** The error `response` answers to `what` (`GET threads`, say). */
export async function errorOf(response: Response, what: string): Promise<AgentTowerError> {
  const body = (await response.json().catch(() => ({}))) as {
    error?: { code?: string; message?: string };
  };
  return new AgentTowerError(
    response.status,
    body.error?.code,
    body.error?.message ?? `${what}: ${response.status}`,
  );
}
