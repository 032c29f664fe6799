//! The check every `[WORKLOAD.mix]` table shares: weights in range, and
//! at least one transaction that runs.

use super::ConfigError;

/// Checks a mix's weights: each at most 1,000,000, not all 0.
pub fn validate_mix(section: &str, names: &[&str], weights: &[u32]) -> Result<(), ConfigError> {
    for (name, &weight) in names.iter().zip(weights) {
        if weight > 1_000_000 {
            return Err(ConfigError(format!(
                "{section}.mix.{name} = {weight} is out of range; allowed: 0..=1000000 (a relative weight)"
            )));
        }
    }
    if weights.iter().all(|&w| w == 0) {
        return Err(ConfigError(format!(
            "{section}.mix gives every transaction weight 0; allowed: at least one positive weight among {}",
            names.join(", ")
        )));
    }
    Ok(())
}
