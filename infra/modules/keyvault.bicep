// The three secrets, in a vault that authorizes by Azure RBAC (no access policies). The app reads
// them through Key Vault references resolved with its user-assigned identity.
param name string
param location string
param tags object

@secure()
param brevoApiKey string

@secure()
param signingKey string

@secure()
param hashSecret string

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: tenant().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: 90
    // Purge protection stays off so that `azd down --purge` can remove an environment: the azd
    // environment keeps the generated secrets too, and every provision writes them here again.
    // It can be turned on later (never off again).
    publicNetworkAccess: 'Enabled'
  }
}

// Secret names allow letters, digits and dashes only: each is its app setting, lower-case and dashed.
// contentType says what the value is to whoever reads it from the vault (the restore steps in
// docs/deploying.md): the Brevo key and the hash secret are one line of text, the signing key a PEM.
resource brevoApiKeySecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'brevo-api-key'
  properties: {
    value: brevoApiKey
    contentType: 'text/plain'
  }
}

resource signingKeySecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'storefront-signing-key'
  properties: {
    value: signingKey
    contentType: 'application/x-pem-file'
  }
}

resource hashSecretSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'storefront-hash-secret'
  properties: {
    value: hashSecret
    contentType: 'text/plain'
  }
}

output name string = vault.name
// Versionless URIs: a reference follows the latest version, so a rotation needs no settings change.
output brevoApiKeySecretUri string = brevoApiKeySecret.properties.secretUri
output signingKeySecretUri string = signingKeySecret.properties.secretUri
output hashSecretSecretUri string = hashSecretSecret.properties.secretUri
