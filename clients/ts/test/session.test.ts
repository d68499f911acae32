// src/copas.ts AccountSession: a guest's device secret made once and kept, tokens kept and
// refreshed when they run out (one refresh at a time), a reused refresh token refused and the
// session then gone, password sign-in replacing the guest's session. Against a fake
// AccountService that answers as the server does (tokens that run out, refresh tokens that
// work once, SESSION_EXPIRED and SESSION_REVOKED in the ErrorInfo).

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import {
  AccountSession,
  DEVICE_KEY,
  MemoryStore,
  newDeviceSecret,
  refusal,
  type SessionCalls,
  TOKENS_KEY,
} from "../src/copas.js";
import { type Session, SessionSchema } from "../src/gen/copas/v1/accounts_pb.js";
import { ErrorInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";

const ACCESS_MS = 60_000;

function refused(reason: string): ConnectError {
  return new ConnectError(reason.toLowerCase(), Code.Unauthenticated, undefined, [
    { desc: ErrorInfoSchema, value: { reason, domain: "copas.v1" } },
  ]);
}

const at = (ms: number) => ({ seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 });

/** The server's rules in miniature. */
class FakeAccounts implements SessionCalls {
  clock = 1_000_000;
  calls: string[] = [];
  private next = 0;
  readonly devices = new Map<string, string>(); // secret -> account id
  readonly refresh = new Map<string, { account: string; current: boolean; family: number }>();
  readonly access = new Map<string, { account: string; expires: number }>();
  readonly ended = new Set<number>();

  private issue(account: string, family: number, isNew = false): Session {
    const n = ++this.next;
    const accessToken = `access-${n}`;
    const refreshToken = `refresh-${n}`;
    this.access.set(accessToken, { account, expires: this.clock + ACCESS_MS });
    this.refresh.set(refreshToken, { account, current: true, family });
    return create(SessionSchema, {
      account: { accountId: account, displayName: `Player ${account}` },
      accessToken,
      accessExpireTime: at(this.clock + ACCESS_MS),
      refreshToken,
      refreshExpireTime: at(this.clock + 30 * 86_400_000),
      isNewAccount: isNew,
    });
  }

  signInDevice = (async (request: { deviceSecret?: string }) => {
    this.calls.push("signInDevice");
    const secret = request.deviceSecret ?? "";
    if (secret.length < 22) throw refused("WEAK_DEVICE_SECRET");
    const known = this.devices.get(secret);
    const account = known ?? `a_${this.devices.size + 1}`;
    this.devices.set(secret, account);
    return { session: this.issue(account, ++this.next, !known) };
  }) as unknown as SessionCalls["signInDevice"];

  signInPassword = (async (request: { username?: string; password?: string }) => {
    this.calls.push("signInPassword");
    if (request.username !== "ana" || request.password !== "correct horse") throw refused("INVALID_CREDENTIALS");
    return { session: this.issue("a_ana", ++this.next) };
  }) as unknown as SessionCalls["signInPassword"];

  refreshSession = (async (request: { refreshToken?: string }) => {
    this.calls.push("refreshSession");
    const found = this.refresh.get(request.refreshToken ?? "");
    if (!found || this.ended.has(found.family)) throw refused("SESSION_REVOKED");
    if (!found.current) {
      this.ended.add(found.family); // someone copied it: the whole session ends
      throw refused("SESSION_REVOKED");
    }
    found.current = false;
    return { session: this.issue(found.account, found.family) };
  }) as unknown as SessionCalls["refreshSession"];

  signOut = (async (request: { everywhere?: boolean }) => {
    this.calls.push(request.everywhere ? "signOut everywhere" : "signOut");
    return { sessionsEnded: request.everywhere ? 2 : 1 };
  }) as unknown as SessionCalls["signOut"];

  /** What a call with ``headers`` finds: the account, or a refusal. */
  who(headers: Record<string, string>): string {
    const token = (headers.authorization ?? "").replace(/^Bearer /, "");
    const found = this.access.get(token);
    if (!found) throw refused("SESSION_REVOKED");
    if (found.expires <= this.clock) throw refused("SESSION_EXPIRED");
    return found.account;
  }
}

function setUp() {
  const server = new FakeAccounts();
  const store = new MemoryStore();
  const session = new AccountSession(server, store, () => server.clock);
  return { server, store, session };
}

describe("a device secret", () => {
  it("is 32 random bytes in base64url", () => {
    const secret = newDeviceSecret();
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(newDeviceSecret()).not.toBe(secret);
  });
});

describe("a guest's session", () => {
  it("signs in once, keeps the secret and the tokens, and comes back as the same account", async () => {
    const { server, store, session } = setUp();
    const token = await session.accessToken(); // nothing kept: a guest signs in
    expect(server.who({ authorization: `Bearer ${token}` })).toBe("a_1");
    expect(await session.accessToken()).toBe(token); // kept, still good: no call
    expect(server.calls).toEqual(["signInDevice"]);
    const secret = store.getItem(DEVICE_KEY);
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(JSON.parse(store.getItem(TOKENS_KEY) ?? "{}").method).toBe("device");

    store.removeItem(TOKENS_KEY); // tokens lost, the device remembered: the same account
    const again = new AccountSession(server, store, () => server.clock);
    expect(server.who(await again.headers())).toBe("a_1");
    expect(store.getItem(DEVICE_KEY)).toBe(secret);
  });

  it("refreshes an expired access token, one refresh for calls at once", async () => {
    const { server, session } = setUp();
    const first = await session.accessToken();
    server.clock += ACCESS_MS; // run out
    const [a, b] = await Promise.all([session.accessToken(), session.accessToken()]);
    expect(a).toBe(b);
    expect(a).not.toBe(first);
    expect(server.calls).toEqual(["signInDevice", "refreshSession"]);
    expect(server.who({ authorization: `Bearer ${a}` })).toBe("a_1");
  });

  it("refreshes before the token runs out, and after the server says SESSION_EXPIRED", async () => {
    const server = new FakeAccounts();
    let lag = 0; // how far this client's clock is behind the server's
    const session = new AccountSession(server, new MemoryStore(), () => server.clock - lag);
    await session.accessToken();
    server.clock += ACCESS_MS - 10_000; // within the margin
    await session.accessToken();
    expect(server.calls.at(-1)).toBe("refreshSession");
    // The server's clock runs ahead of ours: the call is refused, refreshed, and made again.
    const seen: string[] = [];
    server.clock += ACCESS_MS;
    lag = ACCESS_MS;
    const result = await session.call(async (headers) => {
      seen.push(headers.authorization ?? "");
      return server.who(headers);
    });
    expect(result).toBe("a_1");
    expect(seen.length).toBe(2);
    expect(seen[0]).not.toBe(seen[1]);
  });

  it("a reused refresh token is refused, and the session it belonged to ends", async () => {
    const { server, store, session } = setUp();
    await session.accessToken();
    const stolen = session.tokens!.refreshToken;
    await session.refresh(); // the rightful owner refreshes: the stolen copy is spent
    const current = session.tokens!;
    await expect(server.refreshSession({ refreshToken: stolen } as never)).rejects.toSatisfy(
      (error: unknown) => refusal(error).reason === "SESSION_REVOKED",
    );
    // The whole session is over: the owner's own refresh is refused now, and forgotten.
    await expect(session.refresh()).rejects.toSatisfy((error: unknown) => refusal(error).reason === "SESSION_REVOKED");
    expect(store.getItem(TOKENS_KEY)).toBeNull();
    expect(store.getItem(DEVICE_KEY)).not.toBeNull();
    // The next call signs the guest in again: the same account, a new session.
    server.clock += ACCESS_MS;
    const token = await session.accessToken();
    expect(token).not.toBe(current.accessToken);
    expect(server.who({ authorization: `Bearer ${token}` })).toBe("a_1");
    expect(server.calls.at(-1)).toBe("signInDevice");
  });
});

describe("a password sign-in", () => {
  it("replaces the guest's session; a wrong password keeps it", async () => {
    const { server, session } = setUp();
    await session.accessToken();
    const guest = session.tokens!;
    await expect(session.signInPassword("ana", "wrong")).rejects.toSatisfy(
      (error: unknown) => refusal(error).reason === "INVALID_CREDENTIALS",
    );
    expect(session.tokens).toEqual(guest);
    await session.signInPassword("ana", "correct horse");
    expect(session.tokens!.method).toBe("password");
    expect(server.who(await session.headers())).toBe("a_ana");
    expect(session.account?.accountId).toBe("a_ana");
    expect(await session.signOut()).toBe(1);
    expect(session.tokens).toBeUndefined();
    expect(server.calls.at(-1)).toBe("signOut");
    await session.signInPassword("ana", "correct horse");
    expect(await session.signOut(true)).toBe(2);
    expect(session.tokens).toBeUndefined();
    expect(server.calls.at(-1)).toBe("signOut everywhere");
  });
});
