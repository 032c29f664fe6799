//! Zipfian ranks in `[0, n)` with skew θ ∈ [0, 1), by the method of Gray et
//! al., "Quickly Generating Billion-Record Synthetic Databases" (SIGMOD'94),
//! which YCSB uses. Rank 0 is the hottest.
//!
//! ζ(n, θ) is summed exactly up to 10⁶ terms and extended by its integral
//! beyond, so set-up stays fast for huge tables (relative error < 10⁻⁶ of
//! the tail).
//!
//! Why hand-written and not `rand_distr::Zipf`: that one samples the exact
//! Zipf law by rejection-inversion (Hörmann and Derflinger), drawing a
//! varying number of words per sample; YCSB's generator, which papers'
//! YCSB figures use, is Gray's closed-form approximation with one draw per
//! key. Switching would change the key distribution a little (hot-key
//! shares no longer YCSB's) and every key stream, and with it every `sim`
//! history hash, which the project keeps fixed for a given config and
//! seed. The method is a dozen lines.
//!
//! Invariants: `sample` draws exactly one `Rng::unit` and returns a rank
//! in `[0, n)`.

use crate::base::rng::Rng;

#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    alpha: f64,
    zeta_n: f64,
    eta: f64,
    half_pow_theta: f64,
}

const EXACT_TERMS: u64 = 1_000_000;

fn zeta(n: u64, theta: f64) -> f64 {
    let exact = n.min(EXACT_TERMS);
    let mut sum: f64 = (1..=exact).map(|i| 1.0 / (i as f64).powf(theta)).sum();
    if n > exact {
        let s = 1.0 - theta;
        sum += ((n as f64).powf(s) - (exact as f64).powf(s)) / s;
    }
    sum
}

impl Zipf {
    pub fn new(n: u64, theta: f64) -> Zipf {
        assert!(n >= 1 && (0.0..1.0).contains(&theta), "validated by config");
        let zeta_n = zeta(n, theta);
        let zeta_2 = zeta(2.min(n), theta);
        let eta = if n <= 1 {
            0.0
        } else {
            (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta_2 / zeta_n)
        };
        Zipf {
            n,
            alpha: 1.0 / (1.0 - theta),
            zeta_n,
            eta,
            half_pow_theta: 0.5f64.powf(theta),
        }
    }

    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        if self.n == 1 {
            return 0;
        }
        let u = rng.unit();
        let uz = u * self.zeta_n;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + self.half_pow_theta {
            return 1;
        }
        let rank = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        rank.min(self.n - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_concentrates_on_low_ranks() {
        let mut rng = Rng::new(7);
        let skewed = Zipf::new(10_000, 0.99);
        let uniform = Zipf::new(10_000, 0.0);
        let hot = |z: &Zipf, rng: &mut Rng| (0..100_000).filter(|_| z.sample(rng) < 100).count();
        let skewed_hot = hot(&skewed, &mut rng);
        let uniform_hot = hot(&uniform, &mut rng);
        // Top 1 % of ranks: about 1 % of draws when uniform, over half when θ = 0.99.
        assert!(
            uniform_hot < 2_000,
            "uniform put {uniform_hot} in the top 1 %"
        );
        assert!(
            skewed_hot > 50_000,
            "θ=0.99 put only {skewed_hot} in the top 1 %"
        );
        assert!((0..10_000).all(|_| skewed.sample(&mut rng) < 10_000));
    }
}
