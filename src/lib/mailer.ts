import nodemailer from "nodemailer";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Config } from "../config";
import { newId } from "./ids";
import type { Logger } from "./log";

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  /** Threading: a message's own id, and the id of the message it answers (mail clients group them). */
  messageId?: string;
  inReplyTo?: string;
  references?: string;
}

/** What logs say of a recipient: the domain of the address, which names no one. */
export const recipientDomain = (address: string) => address.slice(address.lastIndexOf("@") + 1).toLowerCase();

export interface Mailer {
  /** Resolves once the message is handed to the SMTP server, or written to the outbox without one. */
  sendMail(message: MailMessage): Promise<void>;
  /** Waits for messages still being sent; for graceful shutdown. */
  drain(): Promise<void>;
}

/**
 * Mail over SMTP_URL, or, when it is unset, RFC 822 `.eml` files in `$DATA_DIR/outbox/` so a
 * single-machine install still gets its links. Message bodies may hold secrets (claim links): only
 * the recipient's domain, the subject and the file name are logged, never the address.
 */
export function createMailer(config: Pick<Config, "smtpUrl" | "mailFrom" | "dataDir">, log: Logger): Mailer {
  const outbox = join(config.dataDir, "outbox");
  const smtp = config.smtpUrl ? nodemailer.createTransport(config.smtpUrl, { from: config.mailFrom }) : null;
  const composer = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: "windows" }, { from: config.mailFrom });
  const pending = new Set<Promise<void>>();

  async function deliver(message: MailMessage): Promise<void> {
    if (smtp) {
      await smtp.sendMail(message);
      log.info("mail sent", { toDomain: recipientDomain(message.to), subject: message.subject });
      return;
    }
    const { message: eml } = await composer.sendMail(message);
    await mkdir(outbox, { recursive: true });
    const file = join(outbox, `${new Date().toISOString().replace(/[:.]/g, "-")}-${newId()}.eml`);
    await writeFile(file, eml as Buffer, { mode: 0o600 });
    log.info("mail written to outbox (SMTP_URL is not set)", { toDomain: recipientDomain(message.to), subject: message.subject, file });
  }

  return {
    sendMail(message) {
      const sending = deliver(message).finally(() => pending.delete(sending));
      pending.add(sending);
      return sending;
    },
    async drain() {
      await Promise.allSettled([...pending]);
      smtp?.close();
    },
  };
}
