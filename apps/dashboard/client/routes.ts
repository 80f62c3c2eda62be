// Finding the page of an address (route-table.ts lists them) and loading its module.
import type { PageModule } from './context.ts';
import { PAGES, type PageEntry } from './route-table.ts';

export interface Route extends PageEntry {
  load: () => Promise<PageModule>;
}

export const ROUTES: Route[] = PAGES.map((page) => ({ ...page, load: () => import(`./pages/${page.module}.ts`) as Promise<PageModule> }));

/** The route of a path and its parameters, or null. */
export function match(pathname: string): { route: Route; params: Record<string, string> } | null {
  const parts = pathname.replace(/\/+$/, '').split('/');
  for (const route of ROUTES) {
    const pattern = route.path.split('/');
    if (pattern.length !== parts.length) continue;
    const params: Record<string, string> = {};
    const fits = pattern.every((segment, i) => {
      if (segment.startsWith(':')) {
        if (!/^[A-Za-z0-9_-]{1,64}$/.test(parts[i])) return false;
        params[segment.slice(1)] = parts[i];
        return true;
      }
      return segment === parts[i];
    });
    if (fits) return { route, params };
  }
  return null;
}

/** A route's path with its parameters filled in. */
export const pathOf = (path: string, params: Record<string, string>) => path.replace(/:([A-Za-z]+)/g, (_, name: string) => params[name]);
