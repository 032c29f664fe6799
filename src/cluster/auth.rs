//! Who may join a multi-process run: the job key and the job id.
//!
//! The bootstrap's port is open to anything that can reach rank 0, so a
//! connection is admitted only once it proves it belongs to this job:
//!
//! * **Job key** (`--cluster-key` or `VERBENA_CLUSTER_KEY`; `verbena
//!   launch` makes a random one per run): a secret every rank of the job
//!   holds. Rank 0 sends each new connection a fresh nonce from the OS
//!   (challenge–response); the joiner answers
//!   `HMAC-SHA256(key, tag ‖ nonce ‖ rank ‖ configuration digest ‖ job id)`
//!   ([`prove`]), and rank 0 checks it in constant time ([`verify`]). The
//!   key itself never crosses the wire, and an answer recorded from one
//!   join is worthless for the next (new nonce).
//! * **Job id** ([`job_id_from_env`]): what the launcher calls this job
//!   (`SLURM_JOB_ID`, Open MPI's `PMIX_NAMESPACE`, …). It is no secret, but
//!   without a key it still keeps two jobs that meet on one port apart: a
//!   rank of another job is refused instead of joining this one.
//!
//! Invariants: a key is never printed (its `Debug` is redacted); a proof is
//! compared only through `Mac::verify_slice` (constant time); the MAC input
//! is length-prefixed, so no two distinct (rank, digest, job) triples
//! authenticate the same bytes.
//!
//! HMAC and SHA-256 come from the RustCrypto crates (`hmac`, `sha2`), the
//! nonce from `getrandom`: nothing cryptographic is hand-written here.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of the nonce rank 0 sends and of a proof.
pub const NONCE_BYTES: usize = 32;

/// The fewest bytes a user-chosen key may have: a shorter one could be
/// guessed offline by anyone who saw one nonce and its answer.
pub const MIN_KEY_BYTES: usize = 16;

/// Separates these MACs from any other use of the same key.
const TAG: &[u8] = b"verbena-bootstrap-join-v1";

/// The secret shared by a job's ranks.
#[derive(Clone)]
pub struct ClusterKey(Vec<u8>);

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterKey(<redacted>)")
    }
}

impl ClusterKey {
    /// A key as the user gave it (`origin` names the flag or variable, for
    /// the error).
    pub fn parse(text: &str, origin: &str) -> Result<ClusterKey, String> {
        if text.len() < MIN_KEY_BYTES {
            return Err(format!(
                "{origin} is {} bytes long; a cluster key needs at least {MIN_KEY_BYTES} (e.g. `head -c 32 /dev/urandom | base64`)",
                text.len()
            ));
        }
        if text.chars().any(|c| c.is_control()) {
            return Err(format!(
                "{origin} contains a control character (a newline?); allowed: printable text"
            ));
        }
        Ok(ClusterKey(text.as_bytes().to_vec()))
    }

    /// A fresh random key (32 bytes from the OS, as 64 hex digits, so it
    /// can travel in an environment variable).
    pub fn generate() -> Result<ClusterKey, String> {
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).map_err(|e| format!("the OS gave no random bytes: {e}"))?;
        Ok(ClusterKey(hex(&raw).into_bytes()))
    }

    /// The key as text (to hand to a rank; never to print).
    pub fn expose(&self) -> &str {
        std::str::from_utf8(&self.0).expect("keys are built from text")
    }
}

/// A fresh job id for a run `verbena launch` starts.
pub fn fresh_job_id() -> Result<String, String> {
    let mut raw = [0u8; 8];
    getrandom::fill(&mut raw).map_err(|e| format!("the OS gave no random bytes: {e}"))?;
    Ok(format!("launch-{}", hex(&raw)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh nonce from the OS for one join.
pub fn nonce() -> Result<[u8; NONCE_BYTES], String> {
    let mut nonce = [0u8; NONCE_BYTES];
    getrandom::fill(&mut nonce).map_err(|e| format!("the OS gave no random bytes: {e}"))?;
    Ok(nonce)
}

fn mac(key: &ClusterKey, nonce: &[u8], rank: u32, digest: u64, job: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(&key.0).expect("HMAC takes a key of any length");
    mac.update(TAG);
    mac.update(&(nonce.len() as u64).to_le_bytes());
    mac.update(nonce);
    mac.update(&(rank as u64).to_le_bytes());
    mac.update(&digest.to_le_bytes());
    mac.update(&(job.len() as u64).to_le_bytes());
    mac.update(job.as_bytes());
    mac
}

/// The joiner's answer to `nonce`: it holds `key` and is `rank` of job
/// `job` running the configuration with `digest`.
pub fn prove(key: &ClusterKey, nonce: &[u8], rank: u32, digest: u64, job: &str) -> Vec<u8> {
    mac(key, nonce, rank, digest, job)
        .finalize()
        .into_bytes()
        .to_vec()
}

/// Whether `proof` is [`prove`]'s answer for these values (constant time).
pub fn verify(
    key: &ClusterKey,
    nonce: &[u8],
    rank: u32,
    digest: u64,
    job: &str,
    proof: &[u8],
) -> bool {
    mac(key, nonce, rank, digest, job)
        .verify_slice(proof)
        .is_ok()
}

/// What the launcher calls this job, and the variable it came from: the
/// first set of `VERBENA_JOB_ID` (what `verbena launch` sets, or a user's
/// own), `SLURM_JOB_ID` (with `SLURM_STEP_ID`: two `srun`s in one
/// allocation are two jobs), `PMIX_NAMESPACE` (Open MPI 4 and 5, and any
/// PMIx launcher), `OMPI_MCA_ess_base_jobid` (Open MPI 4) or
/// `OMPI_MCA_orte_ess_jobid` (older Open MPI). Empty values count as unset.
pub fn job_id_from_env(lookup: impl Fn(&str) -> Option<String>) -> Option<(String, &'static str)> {
    let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
    if let Some(id) = get("VERBENA_JOB_ID") {
        return Some((id, "VERBENA_JOB_ID"));
    }
    if let Some(job) = get("SLURM_JOB_ID") {
        return Some(match get("SLURM_STEP_ID") {
            Some(step) => (format!("{job}.{step}"), "SLURM_JOB_ID.SLURM_STEP_ID"),
            None => (job, "SLURM_JOB_ID"),
        });
    }
    for name in [
        "PMIX_NAMESPACE",
        "OMPI_MCA_ess_base_jobid",
        "OMPI_MCA_orte_ess_jobid",
    ] {
        if let Some(id) = get(name) {
            return Some((id, name));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_holds_only_for_its_key_nonce_rank_digest_and_job() {
        let key = ClusterKey::parse("correct horse battery staple", "test").unwrap();
        let other = ClusterKey::parse("correct horse battery stable", "test").unwrap();
        let nonce = nonce().unwrap();
        let proof = prove(&key, &nonce, 2, 77, "job-1");
        assert_eq!(proof.len(), NONCE_BYTES);
        assert!(verify(&key, &nonce, 2, 77, "job-1", &proof));
        assert!(!verify(&other, &nonce, 2, 77, "job-1", &proof));
        let fresh = super::nonce().unwrap();
        assert_ne!(fresh, nonce, "each join gets its own nonce");
        assert!(!verify(&key, &fresh, 2, 77, "job-1", &proof));
        assert!(!verify(&key, &nonce, 1, 77, "job-1", &proof));
        assert!(!verify(&key, &nonce, 2, 78, "job-1", &proof));
        assert!(!verify(&key, &nonce, 2, 77, "job-2", &proof));
        assert!(!verify(&key, &nonce, 2, 77, "job-1", &proof[..31]));
        assert!(!verify(&key, &nonce, 2, 77, "job-1", &[]));
    }

    #[test]
    fn keys_are_checked_generated_and_never_printed() {
        let short = ClusterKey::parse("hunter2", "--cluster-key").unwrap_err();
        assert!(
            short.contains("--cluster-key") && short.contains("at least 16"),
            "{short}"
        );
        let newline = ClusterKey::parse("0123456789abcdef\n", "VERBENA_CLUSTER_KEY").unwrap_err();
        assert!(newline.contains("control character"), "{newline}");
        let a = ClusterKey::generate().unwrap();
        let b = ClusterKey::generate().unwrap();
        assert_ne!(a.expose(), b.expose());
        assert_eq!(a.expose().len(), 64);
        assert_eq!(
            ClusterKey::parse(a.expose(), "env").unwrap().expose(),
            a.expose()
        );
        assert!(!format!("{a:?}").contains(a.expose()));
    }

    #[test]
    fn the_job_id_comes_from_the_launcher() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(job_id_from_env(env(&[])), None);
        let slurm = job_id_from_env(env(&[("SLURM_JOB_ID", "42"), ("SLURM_STEP_ID", "3")]));
        assert_eq!(slurm.unwrap().0, "42.3");
        // What Open MPI 4.1 (Debian's openmpi-bin) sets for its ranks.
        let ompi = job_id_from_env(env(&[
            ("OMPI_MCA_ess_base_jobid", "1884356609"),
            ("PMIX_NAMESPACE", "1884356609"),
        ]));
        assert_eq!(ompi, Some(("1884356609".into(), "PMIX_NAMESPACE")));
        let ours = job_id_from_env(env(&[("VERBENA_JOB_ID", "x"), ("SLURM_JOB_ID", "42")]));
        assert_eq!(ours.unwrap().1, "VERBENA_JOB_ID");
        assert_eq!(job_id_from_env(env(&[("PMIX_NAMESPACE", " ")])), None);
    }
}
