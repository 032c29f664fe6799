//! The crate's protocols' RPC handler kinds. The steps the protocols share
//! are the protocol kit's (`txn::kit`).

/// RPC handler kinds, in the protocols' range of `base::rpc_kind`. Shared
/// ones first; each protocol owns a decade.
pub mod kind {
    /// Declares the kinds and [`ALL`], which the build checks against the
    /// protocols' range: in it, and no two equal.
    macro_rules! kinds {
        ($($(#[$doc:meta])* $name:ident = $value:expr;)*) => {
            $($(#[$doc])* pub const $name: u16 = $value;)*
            /// Every kind above.
            pub const ALL: &[u16] = &[$($name),*];
            const _: () = crate::base::rpc_kind::PROTOCOLS.check(ALL);
        };
    }

    kinds! {
        /// The kit's (`txn::kit::kind`).
        WRITE_BACK = crate::txn::kit::kind::WRITE_BACK;
        UNLOCK = crate::txn::kit::kind::UNLOCK;
        /// The 2PL family (`lock2pl`: NO_WAIT, WAIT_DIE, WOUND_WAIT): 10–19.
        NO_WAIT_LOCK_READ = 10;
        LOCK2PL_UPGRADE = 11;
        LOCK2PL_UNLOCK_SHARED = crate::txn::kit::kind::UNLOCK_SHARED;
        LOCK2PL_STATUS_CAS = 13;
        /// WOUND_WAIT by RPC: wound a holder and learn where it waits.
        LOCK2PL_WOUND = 14;
        /// WOUND_WAIT by RPC: answer a wounded waiter's parked request.
        LOCK2PL_WAKE = 15;
        OCC_READ = 20;
        OCC_LOCK = 21;
        OCC_VALIDATE = 22;
        TS_READ = 40;
        TS_LOCK = 41;
        TS_COMMIT = 42;
        TS_LOCK_FETCH = 43;
        TS_INSTALL = 44;
        TS_OUTCOME = 45;
        TS_LOCK_READ = 46;
        MVCC_READ = 50;
        MVCC_LOCK = 51;
        MVCC_COMMIT = 52;
        MVCC_LOCK_READ = 53;
        MAAT_INIT = 60;
        MAAT_REGISTER = 61;
        MAAT_META_READ = 62;
        MAAT_PUSH = 63;
        MAAT_FREEZE = 64;
        MAAT_COMMIT = 65;
        MAAT_UNREGISTER = 66;
        MAAT_ABORT = 67;
        CICADA_READ = 70;
        CICADA_INSTALL = 71;
        CICADA_VALIDATE = 72;
        CICADA_FINISH = 73;
        SUNDIAL_READ = 80;
        SUNDIAL_LOCK = 81;
        SUNDIAL_RENEW = 82;
        SUNDIAL_WRITE_BACK = 83;
        SUNDIAL_RELEASE = 84;
        /// `protocol_options.sundial_lock_at_access`: lock & read at access.
        SUNDIAL_LOCK_READ = 85;
        DRTM_ACCESS = 110;
    }
}
