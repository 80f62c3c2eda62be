// The feedback SMTP server's certificate and key, read from the files RELAY_INBOUND_TLS_CERT and
// RELAY_INBOUND_TLS_KEY name. A file that cannot be read, is not PEM, or a key that is not the
// certificate's is the operator's to fix: a ConfigError naming the variable (exit 78), as for
// every other bad setting, not Node's bare error.
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { ConfigError } from '../../infra/config.ts';

export function readInboundTls(certFile: string, keyFile: string): { cert: Buffer; key: Buffer } {
  const read = (file: string, variable: string) => {
    try {
      return readFileSync(file);
    } catch (error) {
      throw new ConfigError(variable, `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
  };
  const cert = read(certFile, 'RELAY_INBOUND_TLS_CERT');
  const key = read(keyFile, 'RELAY_INBOUND_TLS_KEY');
  try {
    new X509Certificate(cert);
  } catch {
    throw new ConfigError('RELAY_INBOUND_TLS_CERT', `${certFile} holds no PEM certificate`);
  }
  try {
    createPrivateKey(key);
  } catch {
    throw new ConfigError('RELAY_INBOUND_TLS_KEY', `${keyFile} holds no PEM private key`);
  }
  try {
    createSecureContext({ cert, key });
  } catch {
    throw new ConfigError('RELAY_INBOUND_TLS_KEY', `the key in ${keyFile} is not the key of the certificate in ${certFile}`);
  }
  return { cert, key };
}
