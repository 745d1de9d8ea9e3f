// Conversations in the browser's localStorage under STORE_KEY, as
// {conversations: [{id, title, created, messages: [{role, content, reasoning?, usage?, stats?,
// stopped?, error?, finish?}]}], currentId}. Nothing leaves the browser but what a request sends.

export const STORE_KEY = 'pypto-chat.conversations.v1';

export function newConversation() {
  return { id: `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`, title: 'New chat',
           created: new Date().toISOString(), messages: [] };
}

export function loadStore() {
  try {
    const s = JSON.parse(localStorage.getItem(STORE_KEY));
    if (s && Array.isArray(s.conversations) && s.conversations.length) return s;
  } catch { /* a corrupt entry starts over */ }
  const c = newConversation();
  return { conversations: [c], currentId: c.id };
}

// Throws when the browser refuses (quota, private mode).
export function saveStore(store) {
  localStorage.setItem(STORE_KEY, JSON.stringify(store));
}
