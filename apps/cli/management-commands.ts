// Operator commands over the management model. Each entry loads its code only when run.
import type { CommandEntry } from './command.ts';

export const managementCommands: Record<string, CommandEntry> = {
  setup: {
    summary: 'create user, workspace, project, domain and API key in one go (--json for scripts)',
    run: async () => (await import('./management-tasks.ts')).setupCommand,
  },
  user: {
    summary: 'user create --email E [--password P | RELAY_PASSWORD | stdin]',
    run: async () => (await import('./management-tasks.ts')).userCommand,
  },
  workspace: {
    summary: 'workspace activate|deactivate <workspaceId>: allow or stop production sending; workspace quota <workspaceId>: monthly allowances',
    run: async () => (await import('./management-tasks.ts')).workspaceCommand,
  },
  domain: {
    summary: 'domain verify <domainId> (real DNS) | domain mark-verified <domainId> --reason TEXT | domain rotate-dkim|cancel-rotation <domainId>',
    run: async () => (await import('./management-tasks.ts')).domainCommand,
  },
};
