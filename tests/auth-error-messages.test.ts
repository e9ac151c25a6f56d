import { describe, expect, it } from "vitest";
import { linkErrorMessage, signInErrorMessage } from "@/lib/web/auth-client.ts";

// The sign-in and link pages show a message for their ?error= query, which anyone can put in a link.
describe("sign-in and link error messages (from the page's ?error=)", () => {
  it("gives the known codes their messages and anything else a generic one", () => {
    expect(signInErrorMessage("CredentialsSignin")).toBe("Wrong email or password");
    expect(signInErrorMessage("Whatever")).toBe("Sign-in failed; try again");
    expect(signInErrorMessage(undefined)).toBeUndefined();
    expect(linkErrorMessage("LinkExpired")).toMatch(/expired/);
    expect(linkErrorMessage("TooManyAttempts")).toMatch(/Too many sign-in attempts/);
    expect(linkErrorMessage("Whatever")).toBe("Sign-in failed; try again");
  });

  it("never answers with an Object.prototype member: ?error=hasOwnProperty crashed the sign-in form's render", () => {
    for (const code of ["hasOwnProperty", "valueOf", "toString", "constructor", "__proto__", "isPrototypeOf"]) {
      expect(signInErrorMessage(code), code).toBe("Sign-in failed; try again");
      expect(linkErrorMessage(code), code).toBe("Sign-in failed; try again");
    }
  });
});
