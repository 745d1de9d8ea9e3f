"""The chunked (WY / UT-transform) form of the gated delta rule, as plain PyTorch: the reference a
chunked prefill kernel will be held to. Per value head, with q (L2-normed, scaled by 1/sqrt(d_k)),
k (L2-normed), v, log-decay g and beta over T tokens and an incoming state S [d_k, d_v]; chunks of
C tokens (the last zero-padded: k = v = 0, g = beta = 0 leave S unchanged). Per chunk, with the
cumulative log-decay gamma_i = sum_{j<=i} g_j and Gamma_ij = exp(gamma_i - gamma_j) for i >= j
(0 above the diagonal):
    A  = strict_lower((beta * K) K^T * Gamma)            [C, C]
    Tm = (I + A)^{-1}                                    (unit lower-triangular solve)
    U  = Tm (beta * V);  W = Tm (beta * exp(gamma) * K)
    V' = U - W S
    O  = (Q * exp(gamma)) S + lower_incl_diag(Q K^T * Gamma) V'
    S <- exp(gamma_C) S + (K * exp(gamma_C - gamma))^T V'
It equals the recurrent form S = exp(g_t)(I - beta_t k_t k_t^T) S + beta_t k_t v_t^T, o_t = S^T q_t
up to rounding (check_gdn_chunked_reference.py holds it to that).
"""
import torch


def chunked_gated_delta_rule(q, k, v, g, beta, state, chunk=64):
    """q, k [T, d_k]; v [T, d_v]; g, beta [T]; state [d_k, d_v]. Returns (out [T, d_v], state)."""
    T, d_k = k.shape
    d_v = v.shape[1]
    pad = (-T) % chunk
    if pad:
        q = torch.cat((q, q.new_zeros(pad, d_k)))
        k = torch.cat((k, k.new_zeros(pad, d_k)))
        v = torch.cat((v, v.new_zeros(pad, d_v)))
        g = torch.cat((g, g.new_zeros(pad)))
        beta = torch.cat((beta, beta.new_zeros(pad)))
    S = state.clone()
    out = []
    eye = torch.eye(chunk, dtype=q.dtype)
    lower_incl = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool))
    for c0 in range(0, T + pad, chunk):
        Q, K, V = q[c0:c0 + chunk], k[c0:c0 + chunk], v[c0:c0 + chunk]
        gam = torch.cumsum(g[c0:c0 + chunk], 0)
        b = beta[c0:c0 + chunk]
        Gamma = torch.exp((gam[:, None] - gam[None, :]).masked_fill(~lower_incl, float("-inf")))
        A = torch.tril((b[:, None] * K) @ K.T * Gamma, diagonal=-1)
        Tm = torch.linalg.solve_triangular(eye + A, eye, upper=False, unitriangular=True)
        U = Tm @ (b[:, None] * V)
        W = Tm @ ((b * torch.exp(gam))[:, None] * K)
        Vn = U - W @ S
        O = (Q * torch.exp(gam)[:, None]) @ S + ((Q @ K.T) * Gamma).masked_fill(~lower_incl, 0.0) @ Vn
        S = torch.exp(gam[-1]) * S + (K * torch.exp(gam[-1] - gam)[:, None]).T @ Vn
        out.append(O)
    return torch.cat(out)[:T], S


def recurrent_gated_delta_rule(q, k, v, g, beta, state):
    """The plain recurrence (qwen35_reference.py's loop) for one head."""
    S = state.clone()
    out = torch.empty(k.shape[0], v.shape[1], dtype=v.dtype)
    for t in range(k.shape[0]):
        S = S * torch.exp(g[t])
        delta = beta[t] * (v[t] - S.T @ k[t])
        S = S + k[t][:, None] * delta[None, :]
        out[t] = S.T @ q[t]
    return out, S
