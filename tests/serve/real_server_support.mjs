// Starting a server binary (the real pypto-serving, or the scripted-model test server) for node
// tests and the load benchmark: waits for its "on http://127.0.0.1:PORT" line and for /health,
// and stops it with SIGTERM. startServer binds pypto-serving to 127.0.0.1 on a free port;
// spawnServer runs a binary with exactly the given arguments.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';

export async function startServer(binary, args) {
  return spawnServer(binary, ['--host', '127.0.0.1', '--port', '0', ...args]);
}

export async function spawnServer(binary, args) {
  const server = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('server did not start: ' + log)), 120000);
    const onData = (d) => {
      log += d.toString();
      const m = log.match(/on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    server.stdout.on('data', onData);
    server.stderr.on('data', onData);
    server.on('exit', (code) => reject(new Error(`server exited with ${code}: ${log}`)));
  });
  const baseURL = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 1200; i++) {  // bounded: 120 s for the model to load
    const r = await fetch(baseURL + '/health').catch(() => null);
    if (r && r.status === 200) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  return { server, baseURL, log: () => log };
}

export async function stopServer(server) {
  const exited = new Promise((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })));
  server.kill('SIGTERM');
  return exited;
}

// Offline mode's results for the same prompts (the reference for "HTTP equals offline").
export function offlineResults(binary, model, prompts, generateConfig, jsonPath, extraArgs = []) {
  const args = ['--model', model, '--output-json', jsonPath, '--generate-config', JSON.stringify(generateConfig), ...extraArgs];
  for (const p of prompts) args.push('--prompt', p);
  execFileSync(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  return JSON.parse(fs.readFileSync(jsonPath, 'utf8')).results;
}
