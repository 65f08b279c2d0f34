"""The exact log-likelihood of draft rounds under simlab's acceptance model, and its gradient.

For a request's run of rounds t = 0..T-1 (model: docs/acceptance.md), given the shift s_t = delta + z_t:

- position k is judged in a round when it was verified and positions 1..k-1 were accepted; it is accepted with
  probability Lambda(L_k + s_t, token_sd^2) (:class:`~.grid.LogisticNormal`);
- where the log has the head's raw confidence c_hat_k, its logit h_k = L_k + s_t + eps_k + bias + noise * xi_k
  is Gaussian around L_k + bias + s_t with variance nu^2 = token_sd^2 + noise^2, and given h_k the token term is
  eps_k ~ N(w (h_k - L_k - bias - s_t), w noise^2) with w = token_sd^2 / nu^2, so the judged position is accepted
  with probability Lambda((1 - w)(L_k + s_t) + w (h_k - bias), w noise^2).

The request and step terms are summed out by a forward-backward pass over the latent grid (:mod:`.runs`), one
request at a time: this is the full likelihood, so a request's number of rounds (which depends on its outcomes:
hard requests take more rounds) needs no correction. The gradient comes from the posterior over the grid
(Fisher's identity: the score is the posterior mean of the complete-data score). Rounds without confidences are
grouped by type (group, judged, accepted), so their cost does not grow with the log beyond the pass itself.

Parameters, in this order: base logits L (per group and position), then ``SHARED``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from scipy.special import logit

from simlab.acceptance.fitting.grid import LatentGrid, LogisticNormal
from simlab.acceptance.fitting.runs import MAX_SLOTS_PER_BATCH, MAX_SLOTS_WITH_CONFIDENCES, RunLayout, forward_backward
from simlab.acceptance.logs.parsed import Rounds

SHARED = ("request_logit_sd", "step_logit_sd", "step_correlation", "token_logit_sd", "bias_logit", "noise_logit_sd")
REQ, STEP, RHO, TOK, BIAS, NOISE = range(6)
CONF_CLIP = 1e-12


@dataclass
class Evaluation:
    """log-likelihood, its gradient, and (on request) each cluster's score [clusters, params]."""

    loglik: float
    grad: np.ndarray
    cluster_scores: Optional[np.ndarray] = None


class RoundsLikelihood:
    """Prepared rounds of some groups (method, domain): :meth:`evaluate` gives the log-likelihood and gradient.

    ``groups`` maps each (method, domain) to its number of positions; every round's judged positions must fit.
    """

    def __init__(self, rounds: Rounds, groups: dict[tuple[str, str], int], grid: Optional[LatentGrid] = None) -> None:
        self.grid = grid or LatentGrid()
        keys = list(groups)
        self.offsets = np.concatenate([[0], np.cumsum([groups[k] for k in keys])]).astype(np.int64)
        self.num_logits = int(self.offsets[-1])
        self.num_params = self.num_logits + len(SHARED)
        self.num_rounds = len(rounds)
        with_conf = rounds.conf is not None and bool(np.isfinite(rounds.conf).any())
        self.layout = layout = RunLayout(rounds, MAX_SLOTS_WITH_CONFIDENCES if with_conf else MAX_SLOTS_PER_BATCH)
        index = {k: i for i, k in enumerate(keys)}
        group = np.array([index[k] for k in zip(rounds.method.tolist(), rounds.domain.tolist())], dtype=np.int64)
        group = group[layout.order]
        judged, accepted = rounds.judged[layout.order], rounds.accepted[layout.order]
        size = np.diff(self.offsets)[group]
        if (judged > size).any():
            raise ValueError("a round judges more positions than its group has")
        head = self._head_logits(rounds, layout.order, size)
        has_head = np.isfinite(head).any(axis=1) if head is not None else np.zeros(len(group), dtype=bool)
        self.has_head = bool(has_head.any())
        self._prepare_plain(np.flatnonzero(~has_head & (judged > 0)), group, judged, accepted)
        self._prepare_head(np.flatnonzero(has_head), group, judged, accepted, head)

    def _head_logits(self, rounds: Rounds, order: np.ndarray, size: np.ndarray) -> Optional[np.ndarray]:
        if rounds.conf is None:
            return None
        conf = rounds.conf[order]
        limit = np.minimum(rounds.drafted[order], size)
        usable = np.isfinite(conf) & (np.arange(conf.shape[1])[None, :] < limit[:, None])
        return np.where(usable, logit(np.clip(np.nan_to_num(conf), CONF_CLIP, 1 - CONF_CLIP)), np.nan)

    def _prepare_plain(self, rows, group, judged, accepted) -> None:
        """Rounds without confidences, by type (group, judged, accepted)."""
        key = (group[rows] * 64 + judged[rows]) * 64 + accepted[rows]
        types, self.plain_type = np.unique(key, return_inverse=True)
        self.plain_round = rows
        self.type_group, self.type_judged, self.type_accepted = types // 4096, (types // 64) % 64, types % 64

    def _prepare_head(self, rows, group, judged, accepted, head) -> None:
        """Rounds with confidences: one entry per judged position, and one per confidence."""
        count = judged[rows]
        self.pair_round = np.repeat(rows, count)
        self.pair_k = np.arange(len(self.pair_round)) - np.repeat(np.cumsum(count) - count, count)
        self.pair_accepted = self.pair_k < accepted[self.pair_round]
        self.pair_param = self.offsets[group[self.pair_round]] + self.pair_k
        self.pair_h = np.full(len(self.pair_round), np.nan)
        if head is not None and len(self.pair_round):
            inside = self.pair_k < head.shape[1]
            self.pair_h[inside] = head[self.pair_round[inside], self.pair_k[inside]]
        self.pair_has_h = np.isfinite(self.pair_h)
        if head is not None:
            r, c = np.nonzero(np.isfinite(head))
            self.conf_round, self.conf_value, self.conf_param = r, head[r, c], self.offsets[group[r]] + c
        else:
            self.conf_round = self.conf_param = np.zeros(0, dtype=np.int64)
            self.conf_value = np.zeros(0)

    # ------------------------------------------------------------------------------------------------ evaluation
    def evaluate(self, theta: np.ndarray, *, scores: bool = False) -> Evaluation:
        """Log-likelihood and gradient at ``theta`` (layout: module docstring); with ``scores``, each cluster's
        score as well (the rows sum to the gradient)."""
        theta = np.asarray(theta, dtype=float)
        ctx = _Context(self, theta)
        grad = np.zeros(self.num_params)
        shared = np.zeros(len(SHARED))  # d/d(sd_req, sd_step, rho, <unused>, bias, <unused>)
        chain = np.zeros(4)  # d/d(w, head variance, plain variance, nu^2)
        cluster_scores = np.zeros((self.layout.num_clusters, self.num_params)) if scores else None
        gamma_type = np.zeros((len(self.type_group), self.grid.num_states))
        plain = self._plain_emissions(ctx)
        loglik = 0.0
        for batch in self.layout.batches:
            lo, hi = batch.first_round, batch.end_round
            log_e = np.zeros((hi - lo, self.grid.num_states))
            p_lo, p_hi = np.searchsorted(self.plain_round, [lo, hi])
            local_plain, types = self.plain_round[p_lo:p_hi] - lo, self.plain_type[p_lo:p_hi]
            log_e[local_plain] = plain["log_e"][types]
            pairs = self._pair_terms(ctx, lo, hi)
            log_e += pairs["log_e"]
            stats = self._conf_stats(ctx, lo, hi)
            log_e += stats["log_e"]
            post, ll, rho_parts = forward_backward(self.layout, batch, log_e, self.grid, ctx.trans, ctx.dtrans)
            loglik += ll
            shared[RHO] += rho_parts.sum()
            if len(types):
                gamma_type += _group_sum(types, post[local_plain], len(gamma_type))
            pair_grad = self._pair_gradient(ctx, pairs, post, grad, shared, chain)
            conf_grad = self._conf_gradient(ctx, stats, post, grad, shared, chain)
            if scores:
                clusters = self.layout.cluster[self.layout.run[lo:hi]]
                self._plain_scores(ctx, plain, post[local_plain], types, clusters[local_plain], cluster_scores)
                for part in (pair_grad, conf_grad):
                    if part is not None:
                        np.add.at(cluster_scores, (clusters[part["round"]], part["param"]), part["logit"])
                        np.add.at(cluster_scores[:, self.num_logits:], clusters[part["round"]], part["shared"])
                runs = np.arange(batch.first_run, batch.end_run)
                np.add.at(cluster_scores[:, self.num_logits + RHO], self.layout.cluster[runs], rho_parts)
        self._plain_gradient(ctx, plain, gamma_type, grad, shared, chain)
        tok, noise = ctx.noise_gradient(*chain)
        shared[TOK], shared[NOISE] = tok, noise
        grad[self.num_logits:] += shared
        return Evaluation(float(loglik), grad, cluster_scores)

    # plain rounds: one emission row per type
    def _plain_emissions(self, ctx: "_Context") -> dict:
        m = ctx.logits[:, None] + ctx.s[None, :]
        f_acc, d_acc, v_acc = ctx.plain(m)
        f_rej, d_rej, v_rej = ctx.plain(-m)
        d_rej = -d_rej
        before = np.cumsum(np.vstack([np.zeros(len(ctx.s)), f_acc]), axis=0)  # before[i] = sum of f_acc[:i]
        start = self.offsets[self.type_group]
        rejected = self.type_accepted < self.type_judged
        log_e = before[start + self.type_accepted] - before[start]
        rej_param = np.minimum(start + self.type_accepted, self.num_logits - 1)
        log_e = log_e + np.where(rejected[:, None], f_rej[rej_param], 0.0)
        return {"log_e": log_e, "d_acc": d_acc, "v_acc": v_acc, "d_rej": d_rej, "v_rej": v_rej,
                "start": start, "rejected": rejected, "rej_param": rej_param}

    def _type_weights(self, plain: dict, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per parameter and state: the weight of rounds that accepted it, and of rounds that rejected it."""
        acc = np.zeros((self.num_logits + 1, weights.shape[1]))
        rej = np.zeros((self.num_logits, weights.shape[1]))
        first, last = plain["start"], plain["start"] + self.type_accepted
        np.add.at(acc, first, weights)
        np.add.at(acc, last, -weights)
        acc = np.cumsum(acc, axis=0)[:-1]
        np.add.at(rej, plain["rej_param"][plain["rejected"]], weights[plain["rejected"]])
        return acc, rej

    def _plain_gradient(self, ctx, plain, gamma_type, grad, shared, chain) -> None:
        acc, rej = self._type_weights(plain, gamma_type)
        d = acc * plain["d_acc"] + rej * plain["d_rej"]
        grad[: self.num_logits] += d.sum(axis=1)
        shared[REQ] += (d @ ctx.u).sum()
        shared[STEP] += (d @ ctx.v).sum()
        chain[2] += (acc * plain["v_acc"] + rej * plain["v_rej"]).sum()

    def _plain_scores(self, ctx, plain, post, types, clusters, out) -> None:
        if not len(types):
            return
        d_acc, d_rej = plain["d_acc"], plain["d_rej"]
        k = np.arange(self.num_logits)
        start, count = plain["start"][types], self.type_accepted[types]
        acc_mask = (k[None, :] >= start[:, None]) & (k[None, :] < (start + count)[:, None])
        rej_mask = plain["rejected"][types][:, None] & (k[None, :] == plain["rej_param"][types][:, None])
        per_logit = acc_mask * (post @ d_acc.T) + rej_mask * (post @ d_rej.T)
        per_u = acc_mask * (post @ (d_acc * ctx.u).T) + rej_mask * (post @ (d_rej * ctx.u).T)
        per_v = acc_mask * (post @ (d_acc * ctx.v).T) + rej_mask * (post @ (d_rej * ctx.v).T)
        per_var = acc_mask * (post @ plain["v_acc"].T) + rej_mask * (post @ plain["v_rej"].T)
        shared = np.zeros((len(types), len(SHARED)))
        shared[:, REQ], shared[:, STEP] = per_u.sum(axis=1), per_v.sum(axis=1)
        shared[:, TOK], shared[:, NOISE] = ctx.noise_gradient(0.0, 0.0, per_var.sum(axis=1), 0.0)
        np.add.at(out, clusters, np.hstack([per_logit, shared]))

    # rounds with confidences: one term per judged position
    def _pair_terms(self, ctx, lo, hi) -> dict:
        a, b = np.searchsorted(self.pair_round, [lo, hi])
        rnd = self.pair_round[a:b] - lo
        param, h, has = self.pair_param[a:b], self.pair_h[a:b], self.pair_has_h[a:b]
        sign = np.where(self.pair_accepted[a:b], 1.0, -1.0)
        slope = np.where(has, 1.0 - ctx.w, 1.0)
        intercept = np.where(has, (1.0 - ctx.w) * ctx.logits[param] + ctx.w * (np.nan_to_num(h) - ctx.bias),
                             ctx.logits[param])
        m = sign[:, None] * (intercept[:, None] + slope[:, None] * ctx.s[None, :])
        f, d, dv = np.empty_like(m), np.empty_like(m), np.empty_like(m)
        for rows, table in ((~has, ctx.plain), (has, ctx.head)):
            if rows.any():
                f[rows], d[rows], dv[rows] = table(m[rows])
        log_e = np.zeros((hi - lo, len(ctx.s)))
        if len(rnd):
            starts = np.flatnonzero(np.r_[True, rnd[1:] != rnd[:-1]])
            log_e[rnd[starts]] = np.add.reduceat(f, starts, axis=0)
        return {"log_e": log_e, "round": rnd, "param": param, "h": h, "has": has, "slope": slope,
                "d": d * sign[:, None], "dv": dv}

    def _pair_gradient(self, ctx, pairs, post, grad, shared, chain) -> Optional[dict]:
        rnd = pairs["round"]
        if not len(rnd):
            return None
        weighted = post[rnd] * pairs["d"]
        e1, e1u, e1v = weighted.sum(axis=1), weighted @ ctx.u, weighted @ ctx.v
        ev = (post[rnd] * pairs["dv"]).sum(axis=1)
        has, slope = pairs["has"], pairs["slope"]
        d_logit = slope * e1
        np.add.at(grad, pairs["param"], d_logit)
        part = np.zeros((len(rnd), len(SHARED)))
        part[:, REQ], part[:, STEP] = slope * e1u, slope * e1v
        part[:, BIAS] = np.where(has, -ctx.w * e1, 0.0)
        d_w = np.where(has, e1 * (np.nan_to_num(pairs["h"]) - ctx.logits[pairs["param"]] - ctx.bias)
                       - (ctx.sd_req * e1u + ctx.sd_step * e1v), 0.0)
        d_vhead, d_vplain = np.where(has, ev, 0.0), np.where(has, 0.0, ev)
        part[:, TOK], part[:, NOISE] = ctx.noise_gradient(d_w, d_vhead, d_vplain, 0.0)
        shared[[REQ, STEP, BIAS]] += part[:, [REQ, STEP, BIAS]].sum(axis=0)
        chain += [d_w.sum(), d_vhead.sum(), d_vplain.sum(), 0.0]
        return {"round": rnd, "param": pairs["param"], "logit": d_logit, "shared": part}

    # the confidences' Gaussian density
    def _conf_stats(self, ctx, lo, hi) -> dict:
        a, b = np.searchsorted(self.conf_round, [lo, hi])
        rnd = self.conf_round[a:b] - lo
        r = self.conf_value[a:b] - ctx.logits[self.conf_param[a:b]] - ctx.bias
        n = hi - lo
        count = np.bincount(rnd, minlength=n).astype(float)
        sum_r, sum_r2 = np.bincount(rnd, r, minlength=n), np.bincount(rnd, r * r, minlength=n)
        s, nu2 = ctx.s[None, :], ctx.nu2
        log_e = (-0.5 * count * np.log(2 * np.pi * nu2))[:, None] - (
            sum_r2[:, None] - 2 * sum_r[:, None] * s + count[:, None] * s * s) / (2 * nu2) if len(rnd) else 0.0
        return {"log_e": log_e, "round": rnd, "r": r, "param": self.conf_param[a:b], "count": count,
                "sum_r": sum_r, "sum_r2": sum_r2}

    def _conf_gradient(self, ctx, stats, post, grad, shared, chain) -> Optional[dict]:
        rnd = stats["round"]
        if not len(rnd):
            return None
        nu2, s = ctx.nu2, ctx.s
        count, sum_r, sum_r2 = stats["count"], stats["sum_r"], stats["sum_r2"]
        es, es2 = post @ s, post @ (s * s)
        eu, ev, esu, esv = post @ ctx.u, post @ ctx.v, post @ (s * ctx.u), post @ (s * ctx.v)
        d_logit = (stats["r"] - es[rnd]) / nu2
        np.add.at(grad, stats["param"], d_logit)
        part = np.zeros((len(count), len(SHARED)))
        part[:, BIAS] = (sum_r - count * es) / nu2
        part[:, REQ] = (sum_r * eu - count * esu) / nu2
        part[:, STEP] = (sum_r * ev - count * esv) / nu2
        d_nu2 = -count / (2 * nu2) + (sum_r2 - 2 * sum_r * es + count * es2) / (2 * nu2 ** 2)
        part[:, TOK], part[:, NOISE] = ctx.noise_gradient(0.0, 0.0, 0.0, d_nu2)
        shared[[REQ, STEP, BIAS]] += part[:, [REQ, STEP, BIAS]].sum(axis=0)
        chain[3] += d_nu2.sum()
        return _score_parts(rnd, stats["param"], d_logit, part)


def _group_sum(groups: np.ndarray, rows: np.ndarray, num_groups: int) -> np.ndarray:
    """[num_groups, S]: ``rows`` summed by group (a sparse product, much faster than np.add.at)."""
    from scipy.sparse import csr_matrix

    onehot = csr_matrix((np.ones(len(groups)), (groups, np.arange(len(groups)))), shape=(num_groups, len(groups)))
    return onehot @ rows


def _score_parts(rnd, param, d_logit, per_round_shared) -> dict:
    """Score pieces in the form evaluate() adds per cluster: per-confidence logit terms, per-round shared ones."""
    rounds = np.arange(len(per_round_shared))
    return {"round": np.concatenate([rnd, rounds]),
            "param": np.concatenate([param, np.zeros(len(rounds), dtype=np.int64)]),
            "logit": np.concatenate([d_logit, np.zeros(len(rounds))]),
            "shared": np.vstack([np.zeros((len(rnd), per_round_shared.shape[1])), per_round_shared])}


class _Context:
    """Everything one evaluation derives from theta once."""

    def __init__(self, lik: RoundsLikelihood, theta: np.ndarray) -> None:
        grid = lik.grid
        self.logits = theta[: lik.num_logits]
        self.sd_req, self.sd_step, rho, self.sd_tok, self.bias, self.noise = theta[lik.num_logits:]
        self.s = grid.shifts(self.sd_req, self.sd_step)
        self.u = np.repeat(grid.u, grid.num_step)
        self.v = np.tile(grid.v, grid.num_request)
        self.trans, self.dtrans = grid.transition(rho)
        self.has_head = lik.has_head
        tok_var, noise_var = self.sd_tok ** 2, self.noise ** 2
        self.nu2 = tok_var + noise_var if lik.has_head else 1.0
        self.w = tok_var / self.nu2 if lik.has_head else 0.0
        self.plain = _cached_table(tok_var)
        self.head = _cached_table(self.w * noise_var) if lik.has_head else self.plain

    def noise_gradient(self, d_w, d_vhead, d_vplain, d_nu2):
        """From d/d(w, head variance, plain variance, nu^2) to d/d(token_logit_sd, noise_logit_sd)."""
        a, b, nu2 = self.sd_tok ** 2, self.noise ** 2, self.nu2
        if not self.has_head:
            return 2 * self.sd_tok * np.asarray(d_vplain), 0.0 * np.asarray(d_vplain)
        d_a = d_nu2 + d_w * b / nu2 ** 2 + d_vhead * b * b / nu2 ** 2 + d_vplain
        d_b = d_nu2 - d_w * a / nu2 ** 2 + d_vhead * a * a / nu2 ** 2
        return 2 * self.sd_tok * d_a, 2 * self.noise * d_b


_TABLES: dict[float, LogisticNormal] = {}


def _cached_table(variance: float) -> LogisticNormal:
    key = float(variance)
    if key not in _TABLES:
        if len(_TABLES) > 64:
            _TABLES.clear()
        _TABLES[key] = LogisticNormal(key)
    return _TABLES[key]
